// Package testenv is the root of the test environment: the packages below it
// stand up what the tests, the end-to-end tests and the demo run against
// (real mariadbd, etcd and kube-apiserver processes, their child-process
// supervision, throw-away certificates) and the helpers only tests use.
// The product's own plumbing lives in internal/; a path under testenv/ is
// never linked into a binary the project ships (TestShippedBinariesLinkNoTestenv).
//
//	mysqltest   real MariaDB servers
//	etcdtest    a real etcd, embedded in the calling process
//	kubetest    a real kube-apiserver and kube-controller-manager
//	localproc   process groups that die with their parent, log tails, the leak check
//	testcerts   a throw-away CA with a server and a client certificate
//	syncbuf     a buffer one goroutine writes while another reads it
//	readmetest  keeps the generated sections of the README and docs/ equal to the code
package testenv
