package cli

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Shell completion of cluster and member names, read from the DCS within
// --timeout; a DCS that cannot be read completes nothing (the shell then
// offers nothing, rather than file names).

// listingCluster is the cluster name the DCS is opened with to list the
// clusters it holds: opening names no cluster for good, and listing reads
// nothing of it.
const listingCluster = "mysqlha-completion"

// completeArgs completes a command's positional arguments: the cluster
// first (unless --cluster or $MYSQLHA_CLUSTER names it), then, for
// commands that take one, the member.
func (a *app) completeArgs(shape argShape) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		given := a.s.Cluster != ""
		switch {
		case len(args) == 0 && !given:
			return a.clusterNames(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
		case shape == clusterMember && len(args) == 1 && !given:
			a.s.Cluster = args[0]
			fallthrough
		case shape == clusterMember && len(args) == 0 && given:
			return a.memberNames(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeMember completes a flag that names a member (--to, --from) of
// the cluster given by --cluster, $MYSQLHA_CLUSTER or the first argument.
func (a *app) completeMember(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if a.s.Cluster == "" && len(args) > 0 {
		a.s.Cluster = args[0]
	}
	if a.s.Cluster == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.memberNames(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

func (a *app) clusterNames(ctx context.Context, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	a.s.Cluster = listingCluster
	defer func() { a.s.Cluster = "" }()
	c, closeConn, err := a.connect()
	if err != nil || c.Clusters == nil {
		return nil
	}
	defer closeConn()
	ctx, cancel := a.readContext(ctx)
	defer cancel()
	names, err := c.Clusters(ctx)
	if err != nil {
		return nil
	}
	return withPrefix(names, prefix)
}

func (a *app) memberNames(ctx context.Context, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	c, closeConn, err := a.connect()
	if err != nil {
		return nil
	}
	defer closeConn()
	ctx, cancel := a.readContext(ctx)
	defer cancel()
	cl, err := c.Store.Cluster(ctx)
	if err != nil {
		return nil
	}
	var names []string
	for _, m := range cl.Members {
		names = append(names, m.Name)
	}
	return withPrefix(names, prefix)
}

func withPrefix(names []string, prefix string) []string {
	out := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !strings.HasPrefix(n, prefix) })
	slices.Sort(out)
	return out
}
