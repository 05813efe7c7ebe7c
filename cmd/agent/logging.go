package main

import (
	"fmt"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// newLogger is the agent's JSON logger at level, with ISO 8601 times.
func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return zc.Build()
}

// routeKlog sends what client-go logs through klog (watch failures,
// throttling, API warnings) to log, so the stream stays one JSON record
// per line; klog's verbosity levels become zap's debug levels.
func routeKlog(log *zap.Logger) {
	klog.SetLogger(zapr.NewLogger(log.Named("client-go")))
}
