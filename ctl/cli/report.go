package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlha/mysqlha/ctl"
	"github.com/mysqlha/mysqlha/internal/apiauth"
	"github.com/mysqlha/mysqlha/internal/kubeclient"
	"github.com/mysqlha/mysqlha/internal/pemfiles"
)

func (a *app) reportCommand() *cobra.Command {
	var file, tokenFile, caFile, serverName string
	var since time.Duration
	cmd := a.command("report [CLUSTER]", "write a support bundle (status, history, config, members, agents' status, Events, logs; no secret)",
		"agentctl --cluster=demo report [--file=PATH] [--since=1h] [--api-token-file=FILE [--api-tls-ca=FILE --api-tls-server-name=NAME]]", clusterOnly,
		func(ctx context.Context, c *ctl.CLI, _ []string) error {
			if file == "" {
				file = fmt.Sprintf("mysqlha-report-%s-%s.tar.gz", a.s.Cluster, time.Now().UTC().Format("20060102T150405Z"))
			}
			src := ctl.ReportSources{}
			if tokenFile != "" {
				token, err := apiauth.ReadToken("--api-token-file", tokenFile)
				if err != nil {
					return usageErr("%v", err)
				}
				tlsCfg, err := agentTLS(caFile, serverName)
				if err != nil {
					return usageErr("%v", err)
				}
				src.MemberStatus, src.Secrets = agentStatus(token, tlsCfg, a.timeout), []string{token}
			}
			if kc := a.conn.Kube; kc != nil {
				src.Events, src.Pods, src.AgentLog = kubeReport(kc, a.namespace, a.s.Cluster, since)
			}
			return c.Report(ctx, file, src)
		})
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "where to write the report (default mysqlha-report-CLUSTER-TIME.tar.gz here)")
	f.DurationVar(&since, "since", time.Hour, "how much of each agent's log to include (Kubernetes)")
	f.StringVar(&tokenFile, "api-token-file", "", "the cluster's API token, to include each agent's GET /status (the agents must be reachable from here)")
	f.StringVar(&caFile, "api-tls-ca", "", "the CA that verifies the agents' API certificates (ca.crt of the Secret mysqlha-api-tls in deploy/)")
	f.StringVar(&serverName, "api-tls-server-name", "", "the name the agents' API certificates carry (deploy/: mysqlha-agent); needs --api-tls-ca")
	return cmd
}

// agentTLS verifies the agents' API certificates against caFile, by
// serverName when given; nil (the system roots) without a CA.
func agentTLS(caFile, serverName string) (*tls.Config, error) {
	if caFile == "" {
		if serverName != "" {
			return nil, errors.New("--api-tls-server-name needs --api-tls-ca")
		}
		return nil, nil
	}
	pool, err := pemfiles.CAPool("--api-tls-ca", caFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: serverName}, nil
}

// agentStatus asks an agent's GET /status with the cluster's token, over
// TLS with tlsCfg when the agents serve it.
func agentStatus(token string, tlsCfg *tls.Config, timeout time.Duration) func(ctx context.Context, apiURL string) ([]byte, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tlsCfg
	client := &http.Client{Timeout: timeout, Transport: apiauth.Transport(base, token)}
	return func(ctx context.Context, apiURL string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(apiURL, "/")+"/status", nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s/status: %s", apiURL, resp.Status)
		}
		return body, err
	}
}

// kubeReport reads, in namespace, the Events of the cluster's objects, its
// pods' state, and the agent container's log of a pod (a member's pod has
// the member's name).
func kubeReport(kc *kubeclient.Client, namespace, cluster string, since time.Duration) (
	events func(context.Context, []string) ([]byte, error), pods func(context.Context) ([]byte, error),
	agentLog func(context.Context, string) ([]byte, error)) {
	selector := metav1.ListOptions{LabelSelector: "mysqlha.io/cluster=" + cluster}
	pods = func(ctx context.Context) ([]byte, error) {
		list, err := kc.Pods(namespace).List(ctx, selector)
		if err != nil {
			return nil, err
		}
		type container struct {
			Name         string                `json:"name"`
			Ready        bool                  `json:"ready"`
			RestartCount int32                 `json:"restart_count"`
			State        corev1.ContainerState `json:"state"`
			LastState    corev1.ContainerState `json:"last_state"`
		}
		type pod struct {
			Name       string                `json:"name"`
			Phase      corev1.PodPhase       `json:"phase"`
			Node       string                `json:"node"`
			PodIP      string                `json:"pod_ip"`
			Labels     map[string]string     `json:"labels"`
			Conditions []corev1.PodCondition `json:"conditions"`
			Containers []container           `json:"containers"`
		}
		var out []pod
		for _, p := range list.Items {
			v := pod{Name: p.Name, Phase: p.Status.Phase, Node: p.Spec.NodeName, PodIP: p.Status.PodIP, Labels: p.Labels,
				Conditions: p.Status.Conditions}
			for _, cs := range p.Status.ContainerStatuses {
				v.Containers = append(v.Containers, container{cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState})
			}
			out = append(out, v)
		}
		return json.MarshalIndent(out, "", "  ")
	}
	events = func(ctx context.Context, members []string) ([]byte, error) {
		list, err := kc.Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		type event struct {
			Last    time.Time `json:"last"`
			Type    string    `json:"type"`
			Reason  string    `json:"reason"`
			Object  string    `json:"object"`
			Count   int32     `json:"count"`
			Message string    `json:"message"`
		}
		var out []event
		for _, e := range list.Items {
			// The members' pods, and the cluster's Leases (CLUSTER-leader, ...).
			if !slices.Contains(members, e.InvolvedObject.Name) && !strings.HasPrefix(e.InvolvedObject.Name, cluster+"-") {
				continue
			}
			last := e.LastTimestamp.Time
			if last.IsZero() {
				last = e.EventTime.Time
			}
			out = append(out, event{last, e.Type, e.Reason, e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, e.Count, e.Message})
		}
		return json.MarshalIndent(out, "", "  ")
	}
	agentLog = func(ctx context.Context, pod string) ([]byte, error) {
		secs := int64(since.Seconds())
		return kc.Pods(namespace).Log(ctx, pod, &corev1.PodLogOptions{Container: "agent", SinceSeconds: &secs})
	}
	return events, pods, agentLog
}
