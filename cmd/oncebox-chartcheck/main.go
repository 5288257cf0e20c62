// Command oncebox-chartcheck checks manifests rendered by `helm template` of
// deploy/helm/oncebox (testkit/chartcheck): oncebox-chartcheck -job-timeout 30s
// FILE... ; it exits 1 naming each broken promise. `make chart-check` runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/oncebox/oncebox/testkit/chartcheck"
)

func main() {
	jobTimeout := flag.Duration("job-timeout", 30*time.Second, "the job timeout the rendering was made with")
	flag.Parse()
	failed := false
	for _, f := range flag.Args() {
		b, err := os.ReadFile(f)
		if err == nil {
			err = chartcheck.Check(b, *jobTimeout)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "chart-check: %s:\n%v\n", f, err)
			failed = true
			continue
		}
		fmt.Printf("chart-check: %s: ok\n", f)
	}
	if failed {
		os.Exit(1)
	}
}
