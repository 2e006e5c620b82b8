package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// devices is 'dpfl-client devices enroll JOB [--json]' and 'dpfl-client
// devices list JOB': an administrator (API token) enrolls the devices
// that may take part in a devices job, and lists them. Enrolment prints
// the device's credential, the one time the server shows it.
func devices(ctx context.Context, c *command, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "enroll" && args[0] != "list") {
		return fmt.Errorf("devices: want 'devices enroll JOB' or 'devices list JOB'")
	}
	enroll := args[0] == "enroll"
	var asJSON *bool
	if enroll { // the flag exists for enroll only
		asJSON = c.fs.Bool("json", false, "print {job_id, device_id, credential, enrolled_at} as JSON")
	}
	id, err := c.jobArg(args[1:])
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	if enroll {
		en, err := cl.EnrollDevice(ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, en)
		}
		fmt.Fprintf(out, "device %s enrolled for job %s\n", en.DeviceID, en.JobID)
		fmt.Fprintf(out, "credential: %s\n", en.Credential)
		fmt.Fprintf(out, "(shown once: the server keeps only its hash. On the device: dpfl-client participate %s --credential … or $DPFL_DEVICE_CREDENTIAL)\n", en.JobID)
		return nil
	}
	ds, err := cl.Devices(ctx, id)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tENROLLED")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%s\n", d.DeviceID, d.EnrolledAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}
