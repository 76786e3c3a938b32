package api

// The edge between the domain packages' types and the public contract's (package
// github.com/cubefleet/cubefleet/api, imported as contract): every handler answers a contract
// type, built here field by field, so a change to a domain type changes the wire only where a
// line here changes with it.

import (
	"maps"

	contract "github.com/cubefleet/cubefleet/api"
	"github.com/cubefleet/cubefleet/internal/audit"
	"github.com/cubefleet/cubefleet/internal/events"
	"github.com/cubefleet/cubefleet/internal/fleet"
	"github.com/cubefleet/cubefleet/internal/fleet/document"
	"github.com/cubefleet/cubefleet/internal/iam"
	"github.com/cubefleet/cubefleet/internal/nodeapi"
	"github.com/cubefleet/cubefleet/internal/nodes"
	"github.com/cubefleet/cubefleet/internal/sandboxes"
	"github.com/cubefleet/cubefleet/internal/scheduler"
	"github.com/cubefleet/cubefleet/internal/secrets"
)

// NodeOf returns node v as the API shows it (nodes.get's node), for the console.
func NodeOf(v nodes.View) contract.Node { return nodeFrom(v) }

// RoomOf returns the scheduler's room on a node as the API shows it (nodes.get's room).
func RoomOf(r scheduler.Room) *contract.Room { return ptrOf(&r, roomFrom) }

// FleetChangesOf returns a plan's or a drift's changes as the API shows them, for the console.
func FleetChangesOf(cs []fleet.Change) []contract.FleetChange { return sliceOf(cs, fleetChangeFrom) }

// sliceOf converts every element of s with f; nil stays nil (JSON null), empty stays empty.
func sliceOf[T, U any](s []T, f func(T) U) []U {
	if s == nil {
		return nil
	}
	out := make([]U, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}

// ptrOf converts *p with f; nil stays nil.
func ptrOf[T, U any](p *T, f func(T) U) *U {
	if p == nil {
		return nil
	}
	u := f(*p)
	return &u
}

// mapOf converts every value of m with f; nil stays nil.
func mapOf[K comparable, T, U any](m map[K]T, f func(T) U) map[K]U {
	if m == nil {
		return nil
	}
	out := make(map[K]U, len(m))
	for k, v := range maps.All(m) {
		out[k] = f(v)
	}
	return out
}

// auditEntryFrom returns the audit.Entry as the API shows it (contract.AuditEntry).
func auditEntryFrom(v audit.Entry) contract.AuditEntry {
	return contract.AuditEntry{
		ID:          v.ID,
		At:          v.At,
		TenantID:    v.TenantID,
		PrincipalID: v.PrincipalID,
		Method:      v.Method,
		Permission:  v.Permission,
		Scope:       v.Scope,
		Outcome:     v.Outcome,
		Target:      v.Target,
		RequestID:   v.RequestID,
		Message:     v.Message,
		Count:       v.Count,
	}
}

// eventFrom returns the events.Event as the API shows it (contract.Event).
func eventFrom(v events.Event) contract.Event {
	return contract.Event{
		ID:       v.ID,
		At:       v.At,
		TenantID: v.TenantID,
		Type:     v.Type,
		Subject:  v.Subject,
		Data:     v.Data,
	}
}

// fleetApplyResultFrom returns the fleet.ApplyResult as the API shows it (contract.FleetApplyResult).
func fleetApplyResultFrom(v fleet.ApplyResult) contract.FleetApplyResult {
	return contract.FleetApplyResult{
		Plan:    ptrOf(v.Plan, fleetPlanFrom),
		Applied: v.Applied,
	}
}

// fleetPlanFrom returns the fleet.Plan as the API shows it (contract.FleetPlan).
func fleetPlanFrom(v fleet.Plan) contract.FleetPlan {
	return contract.FleetPlan{
		TenantID:      v.TenantID,
		Prune:         v.Prune,
		Changes:       sliceOf(v.Changes, fleetChangeFrom),
		Calls:         sliceOf(v.Calls, fleetCallFrom),
		Summary:       fleetSummaryFrom(v.Summary),
		PlanHash:      v.PlanHash,
		NotInDocument: sliceOf(v.NotInDocument, fleetObjectRefFrom),
	}
}

// fleetChangeFrom returns the fleet.Change as the API shows it (contract.FleetChange).
func fleetChangeFrom(v fleet.Change) contract.FleetChange {
	return contract.FleetChange{
		Kind:    v.Kind,
		Name:    v.Name,
		Action:  v.Action,
		Fields:  v.Fields,
		Diffs:   sliceOf(v.Diffs, fleetFieldDiffFrom),
		Blocked: v.Blocked,
		Note:    v.Note,
	}
}

// fleetFieldDiffFrom returns the fleet.FieldDiff as the API shows it (contract.FleetFieldDiff).
func fleetFieldDiffFrom(v fleet.FieldDiff) contract.FleetFieldDiff {
	return contract.FleetFieldDiff{
		Field: v.Field,
		From:  v.From,
		To:    v.To,
	}
}

// fleetCallFrom returns the fleet.Call as the API shows it (contract.FleetCall).
func fleetCallFrom(v fleet.Call) contract.FleetCall {
	return contract.FleetCall{
		Method: v.Method,
		Kind:   v.Kind,
		Name:   v.Name,
		Input:  v.Input,
	}
}

// fleetSummaryFrom returns the fleet.Summary as the API shows it (contract.FleetSummary).
func fleetSummaryFrom(v fleet.Summary) contract.FleetSummary {
	return contract.FleetSummary{
		Create:         v.Create,
		Update:         v.Update,
		Delete:         v.Delete,
		Unchanged:      v.Unchanged,
		Blocked:        v.Blocked,
		BlockedChanges: v.BlockedChanges,
	}
}

// fleetObjectRefFrom returns the fleet.ObjectRef as the API shows it (contract.FleetObjectRef).
func fleetObjectRefFrom(v fleet.ObjectRef) contract.FleetObjectRef {
	return contract.FleetObjectRef{
		Kind: v.Kind,
		Name: v.Name,
	}
}

// fleetExportFrom returns the fleet.Export as the API shows it (contract.FleetExport).
func fleetExportFrom(v fleet.Export) contract.FleetExport {
	return contract.FleetExport{
		Config:  ptrOf(v.Config, fleetDocumentFrom),
		Missing: sliceOf(v.Missing, fleetMissingFrom),
	}
}

// fleetDocumentFrom returns the document.Document as the API shows it (contract.FleetDocument).
func fleetDocumentFrom(v document.Document) contract.FleetDocument {
	return contract.FleetDocument{
		Version:          v.Version,
		Sites:            sliceOf(v.Sites, fleetSiteFrom),
		ProviderAccounts: sliceOf(v.ProviderAccounts, fleetProviderAccountFrom),
		Pools:            sliceOf(v.Pools, fleetPoolFrom),
		Flavors:          sliceOf(v.Flavors, fleetFlavorFrom),
		SandboxTemplates: sliceOf(v.SandboxTemplates, fleetSandboxTemplateFrom),
	}
}

// fleetSiteFrom returns the document.Site as the API shows it (contract.FleetSite).
func fleetSiteFrom(v document.Site) contract.FleetSite {
	return contract.FleetSite{
		Name:   v.Name,
		Kind:   v.Kind,
		Region: v.Region,
	}
}

// fleetProviderAccountFrom returns the document.ProviderAccount as the API shows it (contract.FleetProviderAccount).
func fleetProviderAccountFrom(v document.ProviderAccount) contract.FleetProviderAccount {
	return contract.FleetProviderAccount{
		Name:     v.Name,
		Provider: v.Provider,
		Config:   v.Config,
	}
}

// fleetPoolFrom returns the document.Pool as the API shows it (contract.FleetPool).
func fleetPoolFrom(v document.Pool) contract.FleetPool {
	return contract.FleetPool{
		Name:            v.Name,
		Site:            v.Site,
		Class:           v.Class,
		GPUModel:        v.GPUModel,
		Policy:          ptrOf(v.Policy, fleetPolicyFrom),
		ProviderAccount: v.ProviderAccount,
		OwnerQuota:      v.OwnerQuota,
		Offers:          sliceOf(v.Offers, fleetOfferFrom),
	}
}

// fleetPolicyFrom returns the document.Policy as the API shows it (contract.FleetPolicy).
func fleetPolicyFrom(v document.Policy) contract.FleetPolicy {
	return contract.FleetPolicy{
		DisruptionBudget: v.DisruptionBudget,
		EgressAllow:      v.EgressAllow,
	}
}

// fleetOfferFrom returns the document.Offer as the API shows it (contract.FleetOffer).
func fleetOfferFrom(v document.Offer) contract.FleetOffer {
	return contract.FleetOffer{
		Tenant:   v.Tenant,
		Quota:    v.Quota,
		Priority: v.Priority,
	}
}

// fleetFlavorFrom returns the document.Flavor as the API shows it (contract.FleetFlavor).
func fleetFlavorFrom(v document.Flavor) contract.FleetFlavor {
	return contract.FleetFlavor{
		Pool:      v.Pool,
		Name:      v.Name,
		VCPU:      v.VCPU,
		MemoryGiB: v.MemoryGiB,
		DiskGiB:   v.DiskGiB,
		GPU:       v.GPU,
	}
}

// fleetSandboxTemplateFrom returns the document.SandboxTemplate as the API shows it (contract.FleetSandboxTemplate).
func fleetSandboxTemplateFrom(v document.SandboxTemplate) contract.FleetSandboxTemplate {
	return contract.FleetSandboxTemplate{
		Name:                    v.Name,
		Pool:                    v.Pool,
		Flavor:                  v.Flavor,
		ImageID:                 v.ImageID,
		Env:                     v.Env,
		Network:                 v.Network,
		Warm:                    ptrOf(v.Warm, fleetWarmFrom),
		TerminationGraceSeconds: v.TerminationGraceSeconds,
		DisconnectGraceSeconds:  v.DisconnectGraceSeconds,
		Runtime:                 v.Runtime,
		EgressAllow:             v.EgressAllow,
	}
}

// fleetWarmFrom returns the document.Warm as the API shows it (contract.FleetWarm).
func fleetWarmFrom(v document.Warm) contract.FleetWarm {
	return contract.FleetWarm{
		Min: v.Min,
		Max: v.Max,
	}
}

// fleetMissingFrom returns the fleet.Missing as the API shows it (contract.FleetMissing).
func fleetMissingFrom(v fleet.Missing) contract.FleetMissing {
	return contract.FleetMissing{
		Kind:   v.Kind,
		Name:   v.Name,
		Reason: v.Reason,
	}
}

// fleetStatusFrom returns the fleet.Status as the API shows it (contract.FleetStatus).
func fleetStatusFrom(v fleet.Status) contract.FleetStatus {
	return contract.FleetStatus{
		TenantID:    v.TenantID,
		Applied:     ptrOf(v.Applied, fleetAppliedFrom),
		Drift:       ptrOf(v.Drift, fleetDriftFrom),
		DriftIgnore: v.DriftIgnore,
		Now:         v.Now,
	}
}

// fleetAppliedFrom returns the fleet.Applied as the API shows it (contract.FleetApplied).
func fleetAppliedFrom(v fleet.Applied) contract.FleetApplied {
	return contract.FleetApplied{
		PlanHash:  v.PlanHash,
		AppliedBy: v.AppliedBy,
		AppliedAt: v.AppliedAt,
		Prune:     v.Prune,
		CheckedAt: v.CheckedAt,
	}
}

// fleetDriftFrom returns the fleet.Drift as the API shows it (contract.FleetDrift).
func fleetDriftFrom(v fleet.Drift) contract.FleetDrift {
	return contract.FleetDrift{
		Changes:  sliceOf(v.Changes, fleetChangeFrom),
		Summary:  fleetSummaryFrom(v.Summary),
		Blocked:  v.Blocked,
		PlanHash: v.PlanHash,
	}
}

// keyFrom returns the iam.Key as the API shows it (contract.Key).
func keyFrom(v iam.Key) contract.Key {
	return contract.Key{
		ID:            v.ID,
		PrincipalID:   v.PrincipalID,
		PrincipalName: v.PrincipalName,
		TenantID:      v.TenantID,
		Prefix:        v.Prefix,
		Grants:        sliceOf(v.Grants, grantFrom),
		CreatedAt:     v.CreatedAt,
		CreatedBy:     v.CreatedBy,
		ExpiresAt:     v.ExpiresAt,
		RevokedAt:     v.RevokedAt,
	}
}

// grantFrom returns the iam.Grant as the API shows it (contract.Grant).
func grantFrom(v iam.Grant) contract.Grant {
	return contract.Grant{
		Permission: v.Permission,
		Scope:      v.Scope,
	}
}

// permissionFrom returns the iam.PermissionInfo as the API shows it (contract.Permission).
func permissionFrom(v iam.PermissionInfo) contract.Permission {
	return contract.Permission{
		Permission: v.Permission,
		Scope:      v.Scope,
		RootOnly:   v.RootOnly,
		Methods:    v.Methods,
	}
}

// tenantFrom returns the iam.Tenant as the API shows it (contract.Tenant).
func tenantFrom(v iam.Tenant) contract.Tenant {
	return contract.Tenant{
		ID:        v.ID,
		CreatedAt: v.CreatedAt,
	}
}

// nodeFrom returns the nodes.View as the API shows it (contract.Node).
func nodeFrom(v nodes.View) contract.Node {
	return contract.Node{
		ID:                   v.ID,
		IP:                   v.IP,
		Agent:                v.Agent,
		RegistryOnly:         v.RegistryOnly,
		PoolID:               v.PoolID,
		Pool:                 v.Pool,
		ClusterLabel:         v.ClusterLabel,
		State:                contract.NodeState(v.State),
		StateSince:           v.StateSince,
		Healthy:              v.Healthy,
		UnhealthyReason:      v.UnhealthyReason,
		Cordoned:             v.Cordoned,
		CordonDetail:         v.CordonDetail,
		CordonedBy:           v.CordonedBy,
		Drain:                ptrOf(v.Drain, nodeDrainFrom),
		Schedulable:          v.Schedulable,
		UnschedulableReasons: v.UnschedulableReasons,
		Labels:               v.Labels,
		InstanceType:         v.InstanceType,
		RegisteredAt:         v.RegisteredAt,
		LastReportAt:         v.LastReportAt,
		HeartbeatAt:          v.HeartbeatAt,
		ReportedSinceStart:   v.ReportedSinceStart,
		HeartbeatWindowMs:    v.HeartbeatWindowMs,
		ReportIntervalMs:     v.ReportIntervalMs,
		Capacity:             nodeResourcesFrom(v.Capacity),
		Quota:                nodeQuotaFrom(v.Quota),
		Allocated:            ptrOf(v.Allocated, nodeAllocatedFrom),
		DiskUsage:            ptrOf(v.DiskUsage, nodeDiskUsageFrom),
		Images:               v.Images,
		LocalTemplates:       v.LocalTemplates,
		Versions:             sliceOf(v.Versions, componentVersionFrom),
		HostFacts:            ptrOf(v.HostFacts, hostFactsFrom),
		NotReadyReason:       v.NotReadyReason,
		NotReadyMessage:      v.NotReadyMessage,
	}
}

// nodeDrainFrom returns the nodes.DrainView as the API shows it (contract.NodeDrain).
func nodeDrainFrom(v nodes.DrainView) contract.NodeDrain {
	return contract.NodeDrain{
		State:         contract.DrainState(v.State),
		Reason:        v.Reason,
		RequestedBy:   v.RequestedBy,
		RequestedAt:   v.RequestedAt,
		SandboxesLeft: v.SandboxesLeft,
		DrainedAt:     v.DrainedAt,
		Deadline:      v.Deadline,
	}
}

// nodeResourcesFrom returns the nodes.ResourcesView as the API shows it (contract.NodeResources).
func nodeResourcesFrom(v nodes.ResourcesView) contract.NodeResources {
	return contract.NodeResources{
		MilliCPU:  v.MilliCPU,
		MemoryMiB: v.MemoryMiB,
	}
}

// nodeQuotaFrom returns the nodes.QuotaView as the API shows it (contract.NodeQuota).
func nodeQuotaFrom(v nodes.QuotaView) contract.NodeQuota {
	return contract.NodeQuota{
		MilliCPU:           v.MilliCPU,
		MemoryMiB:          v.MemoryMiB,
		MaxMvm:             v.MaxMvm,
		CreateConcurrent:   v.CreateConcurrent,
		PausedReleaseRatio: v.PausedReleaseRatio,
	}
}

// nodeAllocatedFrom returns the nodes.AllocatedView as the API shows it (contract.NodeAllocated).
func nodeAllocatedFrom(v nodes.AllocatedView) contract.NodeAllocated {
	return contract.NodeAllocated{
		MilliCPU:      v.MilliCPU,
		MemoryMiB:     v.MemoryMiB,
		Mvm:           v.Mvm,
		MvmRunning:    v.MvmRunning,
		NICQueues:     v.NICQueues,
		DataDiskMiB:   v.DataDiskMiB,
		StorageDiskMB: v.StorageDiskMB,
		At:            v.At,
	}
}

// nodeDiskUsageFrom returns the nodes.DiskUsageView as the API shows it (contract.NodeDiskUsage).
func nodeDiskUsageFrom(v nodes.DiskUsageView) contract.NodeDiskUsage {
	return contract.NodeDiskUsage{
		Data:    v.Data,
		Storage: v.Storage,
		Sys:     v.Sys,
	}
}

// componentVersionFrom returns the nodeapi.ComponentVersion as the API shows it (contract.ComponentVersion).
func componentVersionFrom(v nodeapi.ComponentVersion) contract.ComponentVersion {
	return contract.ComponentVersion{
		Component: v.Component,
		Version:   v.Version,
		Commit:    v.Commit,
		BuildTime: v.BuildTime,
		Source:    v.Source,
		Variant:   v.Variant,
	}
}

// hostFactsFrom returns the nodeapi.HostFacts as the API shows it (contract.HostFacts).
func hostFactsFrom(v nodeapi.HostFacts) contract.HostFacts {
	return contract.HostFacts{
		CPUVendor:             v.CPUVendor,
		CPUModel:              v.CPUModel,
		CPUIDHash:             v.CPUIDHash,
		HostKernelRelease:     v.HostKernelRelease,
		HostKernelFingerprint: v.HostKernelFingerprint,
		KVMAPIVersion:         v.KVMAPIVersion,
		KVMModuleFingerprint:  v.KVMModuleFingerprint,
		KVMModuleTaint:        v.KVMModuleTaint,
		KVMModuleScanned:      v.KVMModuleScanned,
		CPUCount:              v.CPUCount,
		MemTotalMB:            v.MemTotalMB,
	}
}

// roomFrom returns the scheduler.Room as the API shows it (contract.Room).
func roomFrom(v scheduler.Room) contract.Room {
	return contract.Room{
		Reported:      usageFrom(v.Reported),
		Reserved:      usageFrom(v.Reserved),
		Remaining:     usageFrom(v.Remaining),
		Reservations:  v.Reservations,
		MemReserveMiB: v.MemReserveMiB,
	}
}

// usageFrom returns the scheduler.Usage as the API shows it (contract.Usage).
func usageFrom(v scheduler.Usage) contract.Usage {
	return contract.Usage{
		CPU:       v.CPU,
		MemoryMiB: v.MemoryMiB,
		DiskMiB:   v.DiskMiB,
		MvmNum:    v.MvmNum,
	}
}

// nodeSandboxesFrom returns the sandboxes.NodeSandboxes as the API shows it (contract.NodeSandboxes).
func nodeSandboxesFrom(v sandboxes.NodeSandboxes) contract.NodeSandboxes {
	return contract.NodeSandboxes{
		Running:    v.Running,
		Pending:    v.Pending,
		Unknown:    v.Unknown,
		RunningIDs: v.RunningIDs,
		PendingIDs: v.PendingIDs,
		UnknownIDs: v.UnknownIDs,
		WarmIdle:   v.WarmIdle,
	}
}

// joinTokenFrom returns the nodes.JoinToken as the API shows it (contract.JoinToken).
func joinTokenFrom(v nodes.JoinToken) contract.JoinToken {
	return contract.JoinToken{
		ID:        v.ID,
		Prefix:    v.Prefix,
		PoolID:    v.PoolID,
		Pool:      v.Pool,
		Uses:      v.Uses,
		UsesLeft:  v.UsesLeft,
		IP:        v.IP,
		AnyIP:     v.AnyIP,
		State:     contract.JoinTokenState(v.State),
		ExpiresAt: v.ExpiresAt,
		CreatedAt: v.CreatedAt,
		CreatedBy: v.CreatedBy,
		RevokedAt: v.RevokedAt,
		RevokedBy: v.RevokedBy,
	}
}

// sandboxFrom returns the sandboxes.Sandbox as the API shows it (contract.Sandbox).
func sandboxFrom(v sandboxes.Sandbox) contract.Sandbox {
	return contract.Sandbox{
		ID:                      v.ID,
		TenantID:                v.TenantID,
		TemplateID:              v.TemplateID,
		Template:                v.Template,
		PoolID:                  v.PoolID,
		FlavorID:                v.FlavorID,
		NodeID:                  v.NodeID,
		State:                   contract.SandboxState(v.State),
		Reason:                  v.Reason,
		Message:                 v.Message,
		Command:                 v.Command,
		Env:                     v.Env,
		Labels:                  v.Labels,
		NodeSelector:            v.NodeSelector,
		TimeoutSeconds:          v.TimeoutSeconds,
		TerminationGraceSeconds: v.TerminationGraceSeconds,
		Resources:               sandboxResourcesFrom(v.Resources),
		Warm:                    v.Warm,
		ClaimedAt:               v.ClaimedAt,
		RunsAs:                  v.RunsAs,
		CreatedAt:               v.CreatedAt,
		CreatedBy:               v.CreatedBy,
		StopRequestedAt:         v.StopRequestedAt,
		States:                  sliceOf(v.States, sandboxTransitionFrom),
		Result:                  ptrOf(v.Result, sandboxResultFrom),
	}
}

// sandboxResourcesFrom returns the sandboxes.Resources as the API shows it (contract.SandboxResources).
func sandboxResourcesFrom(v sandboxes.Resources) contract.SandboxResources {
	return contract.SandboxResources{
		VCPU:      v.VCPU,
		MemoryGiB: v.MemoryGiB,
		DiskGiB:   v.DiskGiB,
		GPU:       v.GPU,
	}
}

// sandboxTransitionFrom returns the sandboxes.Transition as the API shows it (contract.SandboxTransition).
func sandboxTransitionFrom(v sandboxes.Transition) contract.SandboxTransition {
	return contract.SandboxTransition{
		State:  contract.SandboxState(v.State),
		At:     v.At,
		Reason: v.Reason,
	}
}

// sandboxResultFrom returns the sandboxes.Result as the API shows it (contract.SandboxResult).
func sandboxResultFrom(v sandboxes.Result) contract.SandboxResult {
	return contract.SandboxResult{
		ExitCode:        v.ExitCode,
		Signal:          v.Signal,
		StdoutBytes:     v.StdoutBytes,
		StderrBytes:     v.StderrBytes,
		StdoutTruncated: v.StdoutTruncated,
		StderrTruncated: v.StderrTruncated,
		CPUMillis:       v.CPUMillis,
		PeakMemoryBytes: v.PeakMemoryBytes,
	}
}

// placementFrom returns the scheduler.Decision as the API shows it (contract.Placement).
func placementFrom(v scheduler.Decision) contract.Placement {
	return contract.Placement{
		NodeID:      v.NodeID,
		Score:       v.Score,
		Reservation: reservationFrom(v.Reservation),
	}
}

// reservationFrom returns the scheduler.Reservation as the API shows it (contract.Reservation).
func reservationFrom(v scheduler.Reservation) contract.Reservation {
	return contract.Reservation{
		SandboxID: v.SandboxID,
		NodeID:    v.NodeID,
		Pool:      v.Pool,
		CPU:       v.CPU,
		MemoryMiB: v.MemoryMiB,
		DiskMiB:   v.DiskMiB,
	}
}

// schedulerConfigFrom returns the scheduler.Config as the API shows it (contract.SchedulerConfig).
func schedulerConfigFrom(v scheduler.Config) contract.SchedulerConfig {
	return contract.SchedulerConfig{
		Profile:                        v.Profile,
		PrioritySelectNum:              v.PrioritySelectNum,
		LeastSelectName:                v.LeastSelectName,
		PreSelectNum:                   v.PreSelectNum,
		MetricUpdateTimeout:            contract.Duration(v.MetricUpdateTimeout),
		NodeMaxMvmNum:                  v.NodeMaxMvmNum,
		NodeMaxMvmNumReserveNumPercent: v.NodeMaxMvmNumReserveNumPercent,
		NodeMaxCPUUtil:                 v.NodeMaxCPUUtil,
		NodeMaxMemReservedInMB:         v.NodeMaxMemReservedInMB,
		DiskUsageMaxPercent:            v.DiskUsageMaxPercent,
		Filter:                         schedulerFiltersFrom(v.Filter),
		Score:                          schedulerScoreFrom(v.Score),
	}
}

// schedulerFiltersFrom returns the scheduler.FilterConfig as the API shows it (contract.SchedulerFilters).
func schedulerFiltersFrom(v scheduler.FilterConfig) contract.SchedulerFilters {
	return contract.SchedulerFilters{
		EnableFilters: v.EnableFilters,
	}
}

// schedulerScoreFrom returns the scheduler.ScoreConfig as the API shows it (contract.SchedulerScore).
func schedulerScoreFrom(v scheduler.ScoreConfig) contract.SchedulerScore {
	return contract.SchedulerScore{
		EnableScorers:   v.EnableScorers,
		ResourceWeights: v.ResourceWeights,
		PluginConf:      mapOf(v.PluginConf, schedulerPluginFrom),
	}
}

// schedulerPluginFrom returns the scheduler.PluginConf as the API shows it (contract.SchedulerPlugin).
func schedulerPluginFrom(v scheduler.PluginConf) contract.SchedulerPlugin {
	return contract.SchedulerPlugin{
		Weight:              v.Weight,
		EnableWeightFactors: v.EnableWeightFactors,
		Disable:             v.Disable,
	}
}

// secretFrom returns the secrets.Secret as the API shows it (contract.Secret).
func secretFrom(v secrets.Secret) contract.Secret {
	return contract.Secret{
		ID:        v.ID,
		TenantID:  v.TenantID,
		Name:      v.Name,
		CreatedBy: v.CreatedBy,
		CreatedAt: v.CreatedAt,
	}
}

// webhookWithSecretFrom returns the events.WithSecret as the API shows it (contract.WebhookWithSecret).
func webhookWithSecretFrom(v events.WithSecret) contract.WebhookWithSecret {
	return contract.WebhookWithSecret{
		Webhook:                 webhookFrom(v.Subscription),
		Secret:                  v.Secret,
		PreviousSecretExpiresAt: v.PreviousSecretExpiresAt,
	}
}

// webhookFrom returns the events.Subscription as the API shows it (contract.Webhook).
func webhookFrom(v events.Subscription) contract.Webhook {
	return contract.Webhook{
		ID:          v.ID,
		TenantID:    v.TenantID,
		URL:         v.URL,
		Events:      v.Events,
		Description: v.Description,
		CreatedBy:   v.CreatedBy,
		CreatedAt:   v.CreatedAt,
	}
}

// webhookDeliveryFrom returns the events.Delivery as the API shows it (contract.WebhookDelivery).
func webhookDeliveryFrom(v events.Delivery) contract.WebhookDelivery {
	return contract.WebhookDelivery{
		ID:             v.ID,
		SubscriptionID: v.SubscriptionID,
		TenantID:       v.TenantID,
		EventID:        v.EventID,
		EventType:      v.EventType,
		State:          v.State,
		CreatedAt:      v.CreatedAt,
		Attempts:       v.Attempts,
		NextAttemptAt:  v.NextAttemptAt,
		LastAttemptAt:  v.LastAttemptAt,
		LastStatus:     v.LastStatus,
		LastError:      v.LastError,
		DoneAt:         v.DoneAt,
	}
}
