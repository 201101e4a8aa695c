// Package fleet runs a small fleet of real A2A agents on this machine, for
// trying orchd out and as examples of agent code to copy. Each agent is an
// ordinary a2a-go v2 server with its own Agent Card and one skill:
//
//   - report (skill "report") streams a report in sections, then completes;
//   - steerable (skill "research") works step by step for about half a
//     minute, takes steers and interrupts through the steering package and
//     says which steer it took in its next output;
//   - asker (skill "summary") asks which year to cover (INPUT_REQUIRED) and
//     finishes with the answer;
//   - legacy (skill "legacy") speaks only A2A 0.3, through a2a-go's a2av0
//     handlers;
//   - plain (skill "draft") does the same long work as steerable but
//     declares no steering, so orchd refuses to steer it.
//
// The agents log what they do to the configured slog logger, so a terminal
// shows them taking steers. Start runs them; Close stops them.
package fleet
