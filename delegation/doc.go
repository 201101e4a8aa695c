// Package delegation hands work to an agent that is allowed and able to do
// it, over A2A, and follows the work until it ends.
//
// [Engine.Delegate] finds candidates in the registry (by skill id or tag,
// or a pinned agent), refuses those whose protocol versions orchd cannot
// speak or that lack a required capability, runs the delegation policies,
// and sends the work to the best candidate with an a2a-go client built from
// its card. Nothing is sent when no candidate qualifies: the error lists
// every candidate and why it was refused. An agent that fails before
// accepting the task is skipped for the next one, a bounded number of
// times.
//
// A message to an agent whose card declares orchd's delegation extension
// ([ExtensionURI]) carries it: the chain of agents the work has passed
// through, its depth and limit, its deadline, the requested skill and the
// capabilities the whole chain must honour. An orchd receiving delegated
// work reads it to refuse cycles and over-deep chains and to hold its own
// candidates to the inherited requirements.
//
// Each accepted delegation is a [Delegation]: its state (A2A task states),
// its downstream hop and an ordered, resumable log of events. Records are
// kept behind the [Store] interface.
package delegation
