// Package ctxmerge joins the context a caller passes to a blocking call
// (Source.Next) with the lifetime of the source, so the call wakes when
// either ends, without allocating on every call.
//
// Callers of Next nearly always pass the same context frame after frame;
// the merged context is built once and reused while the caller's context
// stays the same, and rebuilt (one small allocation) when it changes.
package ctxmerge
