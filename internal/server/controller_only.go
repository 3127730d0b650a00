package server

// A controller-only node (process.roles=controller, KRaft's dedicated
// controllers): the quorum member and the CONTROLLER listener, and
// nothing of a broker — no PLAINTEXT listener, no partitions, no
// registration. Brokers (process.roles=broker) reach it through
// controller.quorum.voters or controller.quorum.bootstrap.servers.

import (
	"errors"

	"github.com/sluice-broker/sluice/engine"
)

// controllerOnly reports whether cfg describes a controller-only node.
func controllerOnly(cfg engine.Config) bool {
	return cfg.ClusterMode() && !cfg.HasRole("broker")
}

// startControllerOnly starts a controller-only node.
func startControllerOnly(o Options) (*Server, error) {
	if !o.Config.HasRole("controller") {
		return nil, errors.New("process.roles names neither broker nor controller")
	}
	if o.Metrics != "" {
		o.Logger.Warn("a controller-only node serves no /metrics; ignoring the metrics address")
	}
	ctl, err := startController(o.Config, o.Logger)
	if err != nil {
		return nil, err
	}
	o.Logger.Info("controller-only node: no broker listener", "node", o.Config.NodeID)
	return &Server{Controller: ctl, log: o.Logger, served: make(chan error, 1)}, nil
}

// Fatal reports an error that must stop the node (the broker's
// registration refused for good); nil on a controller-only node.
func (s *Server) Fatal() <-chan error {
	if s.Broker == nil {
		return nil
	}
	return s.Broker.Fatal()
}
