package server

// A cluster node's controller (docs/cluster.md): the quorum member and the
// CONTROLLER listener, started beside the broker when process.roles
// includes controller. It lives here, with the other listeners, because
// the engine never touches a socket.

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
)

// startControllerService starts the controller of a node whose process.roles
// includes controller: the quorum member and the CONTROLLER listener.
func startControllerService(cfg engine.Config, clusterID string, log *slog.Logger) (*controller.Service, error) {
	opts := controller.ServiceConfig{Logger: log}
	voters, err := cfg.Voters()
	if err != nil {
		return nil, err
	}
	if _, ok := voters[cfg.NodeID]; !ok {
		return nil, fmt.Errorf("node %d has the controller role but is not in controller.quorum.voters", cfg.NodeID)
	}
	if cfg.ControllerListen == "" {
		return nil, fmt.Errorf("process.roles has controller but listeners has no %s listener", cfg.ControllerListenerName)
	}
	raw, err := net.Listen("tcp", cfg.ControllerListen)
	if err != nil {
		return nil, fmt.Errorf("controller listener: %w", err)
	}
	var svc atomic.Pointer[controller.Service]
	image := func() (metadata.Image, bool) {
		if s := svc.Load(); s != nil {
			return s.Store().Image(), true
		}
		return metadata.Image{}, false
	}
	ln, err := secureControllerListener(&cfg, raw, image, log) // controller_auth.go
	if err != nil {
		raw.Close()
		return nil, err
	}
	dial, err := controllerDialer(&cfg, log) // interbroker.go
	if err != nil {
		ln.Close()
		return nil, err
	}
	opts.Dial = dial.dialFunc()
	decide := controller.DefaultConfig(clusterID)
	decide.SessionTimeoutMs = cfg.BrokerSessionTimeout.Milliseconds()
	decide.UncleanLeaderElection = cfg.UncleanLeaderElection
	decide.NodeID = cfg.NodeID
	decide.DefaultPartitions = cfg.NumPartitions
	decide.DefaultReplicationFactor = int16(cfg.DefaultReplicationFactor)
	if cfg.AutoLeaderRebalance {
		opts.RebalanceInterval = time.Duration(cfg.LeaderImbalanceCheckSeconds) * time.Second
		opts.RebalancePercent = int(cfg.LeaderImbalancePercent)
	}
	opts.NodeID, opts.ClusterID, opts.Voters, opts.Listener, opts.Decide = cfg.NodeID, clusterID, voters, ln, decide
	opts.Dir = filepath.Join(cfg.DataDir, engine.ClusterMetadataDir)
	if opts.Bootstrap, err = metadata.ReadBootstrap(cfg.DataDir); err != nil {
		ln.Close()
		return nil, err
	}
	opts.ValidateConfigs = engine.ConfigValidator(cfg)
	s, err := controller.StartService(opts)
	if err != nil {
		ln.Close()
		return nil, err
	}
	svc.Store(s)
	log.Info("controller listening", "addr", ln.Addr().String())
	return s, nil
}
