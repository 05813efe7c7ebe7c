package podrole

import (
	"context"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Event types (core/v1).
const (
	EventTypeNormal  = corev1.EventTypeNormal
	EventTypeWarning = corev1.EventTypeWarning
)

// Reasons of the Events the agent records.
const (
	ReasonPromoted   = "Promoted"
	ReasonDemoted    = "Demoted"
	ReasonFenced     = "Fenced"
	ReasonSwitchover = "Switchover"
	ReasonFailover   = "Failover"
	ReasonLeaderLost = "LeaderLost"
)

const (
	// Component is the Events' source.component and reportingComponent.
	Component = "mysqlha-agent"

	// The API server's limits for events.k8s.io (core/v1 is laxer); keeping
	// to them keeps Events readable through both APIs.
	maxReasonLen  = 128
	maxMessageLen = 1024
)

type queuedEvent struct {
	pod, eventType, reason, message string
	at                              time.Time
}

// Event records a core/v1 Event about pod (its involvedObject, with the
// pod's UID so that `kubectl describe pod` lists it). It never blocks and
// never fails the caller: the Event is queued and written by a background
// goroutine within a bounded time (5 s), and a failure, a full queue or a
// closed Labeler is logged and the Event dropped. Events are best-effort
// news for humans; nothing may depend on them.
//
// ctx does not bound the write, which happens after Event returns, so that
// an Event recorded while the caller's context is being cancelled (a
// "Demoted" on shutdown) is still written; Close bounds it instead.
//
// There is no aggregation (count/series): the agent records a few Events
// per role change, not per loop, so plain creates suffice and RBAC needs no
// "patch events".
func (l *Labeler) Event(ctx context.Context, pod, eventType, reason, message string) {
	_ = ctx
	log := l.log.With(zap.String("pod", pod), zap.String("reason", reason))
	if err := validatePodName(pod); err != nil {
		log.Error("event dropped", zap.Error(err))
		return
	}
	if eventType != EventTypeNormal && eventType != EventTypeWarning {
		log.Error("event dropped", zap.String("cause", "type must be Normal or Warning"), zap.String("type", eventType))
		return
	}
	if reason == "" || len(reason) > maxReasonLen {
		log.Error("event dropped", zap.String("cause", "reason must be 1 to 128 characters"))
		return
	}
	e := queuedEvent{pod: pod, eventType: eventType, reason: reason, message: truncate(message, maxMessageLen), at: l.clock.Now()}

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		log.Warn("event dropped", zap.String("cause", "labeler closed"))
		return
	}
	select {
	case l.queue <- e:
	default:
		log.Warn("event dropped", zap.String("cause", "queue full"), zap.Int("queue_size", cap(l.queue)))
	}
}

// Close flushes queued Events, waiting at most 5 s, then stops the Event
// writer; Events recorded afterwards are dropped. SetRole and RemovePrimary
// keep working. Close is idempotent.
func (l *Labeler) Close() {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		close(l.queue)
		l.mu.Unlock()

		// Real time, not l.clock: this bounds a real wait on the network.
		t := time.NewTimer(l.closeTimeout)
		defer t.Stop()
		select {
		case <-l.done:
		case <-t.C:
			// Abort the write in flight; the rest of the queue is then
			// dropped without requests.
			l.cancel()
			select {
			case <-l.done:
			case <-time.After(time.Second):
				l.log.Error("event writer did not stop")
			}
		}
		l.cancel()
	})
}

// writeEvents is the only goroutine that writes Events, so that a slow API
// server delays only Events and they keep their order.
func (l *Labeler) writeEvents() {
	defer close(l.done)
	for e := range l.queue {
		if l.writerCtx.Err() != nil {
			l.log.Warn("event dropped", zap.String("pod", e.pod), zap.String("reason", e.reason),
				zap.String("cause", "labeler closed before it was written"))
			continue
		}
		l.writeEvent(e)
	}
}

func (l *Labeler) writeEvent(e queuedEvent) {
	ctx, cancel := context.WithTimeout(l.writerCtx, l.eventTimeout)
	defer cancel()
	log := l.log.With(zap.String("pod", e.pod), zap.String("reason", e.reason))

	// kubectl describe selects Events on involvedObject.uid; without the UID
	// the Event is still listed by `kubectl get events`.
	var uid types.UID
	if p, err := l.pods.Get(ctx, e.pod, metav1.GetOptions{}); err == nil {
		uid = p.UID
	} else if !apierrors.IsNotFound(err) {
		log.Debug("event without pod uid", zap.Error(l.apiError(err, "get", "pods")))
	}
	at := metav1.NewTime(e.at)
	ev := &corev1.Event{
		// Generated names never collide, also under a fake clock.
		ObjectMeta:          metav1.ObjectMeta{GenerateName: e.pod + ".", Namespace: l.namespace},
		InvolvedObject:      l.podRef(e.pod, uid),
		Reason:              e.reason,
		Message:             e.message,
		Type:                e.eventType,
		FirstTimestamp:      at,
		LastTimestamp:       at,
		Count:               1,
		Source:              corev1.EventSource{Component: Component, Host: l.reporter},
		ReportingController: Component,
		ReportingInstance:   l.reporter,
	}
	if _, err := l.events.Create(ctx, ev, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
		log.Warn("event not recorded", zap.Error(l.apiError(err, "create", "events")))
	}
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
