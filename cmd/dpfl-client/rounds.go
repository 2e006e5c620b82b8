package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// rounds is 'dpfl-client rounds JOB [--plot FILE]': every round's
// participation and estimated deployment time, and optionally a PNG of
// test accuracy against the estimated time (Field Guide §5.4).
func rounds(ctx context.Context, c *command, args []string, out io.Writer) error {
	plotFile := c.fs.String("plot", "", "write test accuracy against estimated deployment time to this PNG")
	id, err := c.jobArg(args)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	rs, err := cl.Rounds(ctx, id)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tselected\tunavailable\treported\tdropped_out\tlate\tstragglers\tsecagg dropped\test. round\test. total\tsim s\ttest acc\tε\t")
	var pts plotter.XYs
	for _, r := range rs {
		acc, eps := "", ""
		if r.TestAccuracy != nil {
			acc = fmt.Sprintf("%.4f", *r.TestAccuracy)
			pts = append(pts, plotter.XY{X: r.EstimatedTotalSeconds / 3600, Y: *r.TestAccuracy})
		}
		if r.Epsilon != nil {
			eps = fmt.Sprintf("%.3f", *r.Epsilon)
		}
		secaggDropped := 0
		if r.SecAgg != nil {
			secaggDropped = r.SecAgg.Dropped
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%.2f\t%s\t%s\t\n", r.Round, r.Selected, r.Unavailable, r.Reported, r.DroppedOut, r.Late, r.Stragglers, secaggDropped,
			seconds(r.EstimatedSeconds), seconds(r.EstimatedTotalSeconds), r.Seconds, acc, eps)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if *plotFile == "" {
		return nil
	}
	return plotAccuracy(*plotFile, id, pts)
}

func seconds(s float64) string {
	return (time.Duration(s*1e3) * time.Millisecond).Round(time.Second).String()
}

func plotAccuracy(file, id string, pts plotter.XYs) error {
	if len(pts) == 0 {
		return fmt.Errorf("job has no evaluated round to plot")
	}
	p := plot.New()
	p.Title.Text = id + ": test accuracy against estimated deployment time"
	p.X.Label.Text = "estimated time on devices (hours)"
	p.Y.Label.Text = "test accuracy"
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Width = vg.Points(1.5)
	p.Add(l)
	return p.Save(7*vg.Inch, 4.5*vg.Inch, file)
}
