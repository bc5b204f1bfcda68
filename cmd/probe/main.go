// Command probe is the container image's health check (the Dockerfile's
// HEALTHCHECK): the image has no shell and no curl. It GETs a URL and exits
// 0 when the answer is a 2xx within the timeout, 1 otherwise, saying why
// on standard error.
//
//	probe [-timeout 3s] URL
//
// The image probes the Control API's /v1/server_info, which the
// supervisor serves on 127.0.0.1:9090.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

// run is the command with its arguments: nil when the URL answered 2xx.
func run(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 3*time.Second, "how long the answer may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one URL, got %d arguments", fs.NArg())
	}
	c := &http.Client{Timeout: *timeout}
	res, err := c.Get(fs.Arg(0))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("%s: %s", fs.Arg(0), res.Status)
	}
	return nil
}
