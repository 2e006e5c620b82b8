package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLogFormatFlag(t *testing.T) {
	for args, want := range map[string]logFormat{"": "text", "--log-format text": "text", "--log-format json": "json", "--log-format=json": "json"} {
		f, err := parseFlags(strings.Fields(args))
		if err != nil || f.logFormat != want {
			t.Errorf("%q: %v, %v; want %s", args, f, err, want)
		}
	}
	if _, err := parseFlags([]string{"--log-format", "xml"}); err == nil || !strings.Contains(err.Error(), "text or json") {
		t.Errorf("--log-format xml: %v", err)
	}
	var b bytes.Buffer
	newLogger(&b, "json").Info("hello", "job", "job-1")
	var line map[string]any
	if err := json.Unmarshal(b.Bytes(), &line); err != nil || line["msg"] != "hello" || line["job"] != "job-1" || line["level"] != "INFO" {
		t.Errorf("json log line %q: %v", b.String(), err)
	}
	b.Reset()
	newLogger(&b, "text").Info("hello", "job", "job-1")
	if !strings.Contains(b.String(), "level=INFO msg=hello job=job-1") {
		t.Errorf("text log line %q", b.String())
	}
}

// The real server with --log-format json writes only JSON lines on
// stderr, and serves /metrics to the API token only.
func TestServerJSONLogsAndMetrics(t *testing.T) {
	addr := freePort(t)
	cmd := exec.Command(serverBin, "--addr", addr, "--db", filepath.Join(t.TempDir(), "dpfl.db"), "--log-format", "json")
	cmd.Env = append(os.Environ(), "DPFL_TOKEN=tok")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for deadline := time.After(20 * time.Second); ; {
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("dpfl-server exited before listening")
			}
			line = l
		case <-deadline:
			t.Fatal("dpfl-server did not log that it listens")
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["time"] == nil || rec["level"] == nil || rec["msg"] == nil {
			t.Fatalf("not a JSON log line: %q (%v)", line, err)
		}
		if rec["msg"] == "dpfl-server listening" {
			break
		}
	}
	for bearer, want := range map[string]int{"": 401, "nope": 401, "tok": 200} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || want == 200 && !strings.Contains(string(b), "dpfl_jobs{state=\"running\"} 0") {
			t.Errorf("GET /metrics with %q: %d, want %d\n%.500s", bearer, resp.StatusCode, want, b)
		}
	}
}
