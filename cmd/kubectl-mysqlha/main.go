// Command kubectl-mysqlha is agentctl as a kubectl plugin: installed on the
// PATH, it runs as `kubectl mysqlha status demo`, with kubectl's
// kubeconfig, --context and -n/--namespace. The command line is
// ctl/cli's, shared with agentctl.
package main

import (
	"os"

	"github.com/mysqlha/mysqlha/ctl/cli"
)

func main() { os.Exit(cli.Main(cli.Plugin)) }
