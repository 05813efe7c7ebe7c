// Command kubectl-mysqlha is agentctl as a kubectl plugin: installed on the
// PATH, it runs as `kubectl mysqlha status demo`, with kubectl's
// kubeconfig, --context and -n/--namespace. The command line is
// internal/agentctlcmd's, shared with agentctl.
package main

import (
	"os"

	"github.com/mysqlha/mysqlha/internal/agentctlcmd"
)

func main() { os.Exit(agentctlcmd.Main(agentctlcmd.Plugin)) }
