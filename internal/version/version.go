// Package version is the build's version, which both binaries report:
// agentctl prints it and the agent publishes it in its member record, so an
// operator sees which members still run an old agent during a rolling
// upgrade.
package version

import "runtime/debug"

// Version overrides the module version when set at link time:
//
//	go build -ldflags "-X github.com/mysqlha/mysqlha/internal/version.Version=v1.2.3"
var Version string

// Get is Version when set, else the main module's version as the go
// command stamped it ("v1.2.3", or a pseudo-version from the VCS), else
// "(devel)".
func Get() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
