package orchestrator

import "github.com/orchd/orchd/registry"

// lineagePeers says whose lineage the delegation engine believes
// (delegation.Config.TrustLineage), as the A2A server believes chain
// contexts: with authentication configured, only that of the agents the
// configuration marks as peers (agents[].peer); with none, as on a
// development daemon, every orchd's. The engine asks only about agents
// whose card declares the delegation extension.
func lineagePeers(agents []registry.Spec, authenticated bool) func(agentID string) bool {
	if !authenticated {
		return func(string) bool { return true }
	}
	peers := map[string]bool{}
	for _, a := range agents {
		if a.Peer && a.ID != "" {
			peers[a.ID] = true
		}
	}
	return func(id string) bool { return peers[id] }
}
