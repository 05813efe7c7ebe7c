// Command agentctl is the operator's tool for a mysqlha cluster: status,
// switchover, failover, pause, resume, history, the cluster config
// (show-config, set-config, edit-config), describe, remove and version. It
// talks only to the DCS (a kubeconfig context or in-cluster, or etcd
// endpoints), so it needs no network path to the database pods. The
// command line is ctl/cli's, shared with kubectl-mysqlha.
package main

import (
	"os"

	"github.com/mysqlha/mysqlha/ctl/cli"
)

func main() { os.Exit(cli.Main(cli.Agentctl)) }
