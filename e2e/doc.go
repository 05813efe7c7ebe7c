// Package e2e holds end-to-end scenarios that drive real MariaDB, real agents
// and a real control plane only through public surfaces: the Kubernetes API,
// the MySQL protocol, agentctl and the agent's HTTP API. Pods are network
// namespaces. One file per scenario.
//
// Not built yet: scenarios arrive with the agent.
package e2e
