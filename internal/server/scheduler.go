package server

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cubefleet/cubefleet"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/scheduler/lane"
)

// expireEvery is how often the lease holder drops reservations older than the reservation TTL.
const expireEvery = 5 * time.Second

// newLane loads --scheduler-config (an invalid file fails the start, naming every problem) and
// builds the placement lane with the scheduler's metrics.
func (s *Server) newLane() error {
	cfg := scheduler.Default()
	if path := s.cfg.SchedulerConfig; path != "" {
		c, warns, err := scheduler.LoadFile(path)
		if err != nil {
			return fmt.Errorf("--scheduler-config: %w", err)
		}
		for _, w := range warns {
			s.log.Warn("scheduler configuration", "file", path, "warning", w.String())
		}
		cfg = c
	}
	host, _ := os.Hostname()
	s.schedM = scheduler.NewMetrics()
	l, err := lane.New(lane.Config{
		DB:     s.db,
		Holder: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), cubefleet.NewID("rep")),
		Scheduler: scheduler.Options{
			Config: cfg, ConfigFile: s.cfg.SchedulerConfig, Now: s.cfg.Now, Metrics: s.schedM,
		},
		Ready: s.nodeStore.Current,
		Log:   s.log,
	})
	if err != nil {
		return err
	}
	s.lane = l
	s.log.Info("scheduler", "profile", cfg.Profile, "priority_select_num", cfg.PrioritySelectNum,
		"least_select_name", cfg.LeastSelectName, "config_file", s.cfg.SchedulerConfig)
	return nil
}

// runScheduler feeds the scheduler from the node registry, runs the placement lane (the
// scheduler lease, the reservations' group commits, the requests forwarded by other replicas)
// and drops expired reservations, until ctx ends.
func (s *Server) runScheduler(ctx context.Context) {
	go s.lane.Scheduler().Follow(ctx, s.nodes)
	go func() {
		t := time.NewTicker(expireEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if s.lane.Holding() {
					if n := s.lane.Scheduler().Expire(); n > 0 {
						s.log.Warn("scheduler reservations expired: their sandboxes were never listed by their nodes nor released", "count", n)
					}
				}
			}
		}
	}()
	s.lane.Run(ctx)
}

// Scheduler returns the server's placement lane.
func (s *Server) Scheduler() *lane.Lane { return s.lane }

// ReloadSchedulerConfig re-reads --scheduler-config (the server does it on SIGHUP) and puts it
// in force. An invalid file keeps the configuration in force: the error, naming every
// problem, is logged once and returned. Without --scheduler-config it logs that there is
// nothing to reload and returns nil.
func (s *Server) ReloadSchedulerConfig() error {
	path := s.cfg.SchedulerConfig
	if path == "" {
		s.log.Info("SIGHUP: nothing to reload (no --scheduler-config)")
		return nil
	}
	warns, err := s.lane.Scheduler().ReloadFile(path)
	if err != nil {
		s.log.Error("scheduler configuration not reloaded: the previous one stays in force", "file", path, "err", err)
		return err
	}
	for _, w := range warns {
		s.log.Warn("scheduler configuration", "file", path, "warning", w.String())
	}
	cfg := s.lane.Scheduler().Config()
	s.log.Info("scheduler configuration reloaded", "file", path, "profile", cfg.Profile,
		"priority_select_num", cfg.PrioritySelectNum, "least_select_name", cfg.LeastSelectName)
	return nil
}
