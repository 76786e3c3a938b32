package server

// ReloadSchedulerConfig re-reads --scheduler-config (the server does it on SIGHUP) and puts it
// in force (controlplane.System.ReloadSchedulerConfig). An invalid file keeps the
// configuration in force: the error, naming every problem, is logged once and returned.
// Without --scheduler-config it logs that there is nothing to reload and returns nil.
func (s *Server) ReloadSchedulerConfig() error { return s.sys.ReloadSchedulerConfig() }
