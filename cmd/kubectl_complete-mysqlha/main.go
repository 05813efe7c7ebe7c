// Command kubectl_complete-mysqlha completes `kubectl mysqlha` command
// lines: kubectl (1.26+) runs it, found on the PATH next to the plugin,
// with the words typed so far, and prints what cobra suggests.
package main

import (
	"os"

	"github.com/mysqlha/mysqlha/ctl/cli"
)

func main() { os.Exit(cli.CompleteMain()) }
