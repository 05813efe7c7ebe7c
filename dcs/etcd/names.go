package etcd

import (
	"context"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ClusterNames lists the clusters that have keys under prefix
// (DefaultPrefix when ""), sorted: what agentctl offers when a command
// names a cluster that has none. It reads keys only, not values.
func ClusterNames(ctx context.Context, cli *clientv3.Client, prefix string) ([]string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, mapErr("listing the clusters under "+prefix+"/", err)
	}
	var names []string
	for _, kv := range resp.Kvs {
		name, _, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix+"/"), "/")
		if ok && name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
