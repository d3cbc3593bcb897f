// Package batch decides when the frames of several cameras run as one
// inference: the batching policy of a pipeline with more than one source,
// and nothing else (no engine, no frame memory, no goroutine of its own).
//
// # The policy
//
// A [Batcher] holds, for each camera, the frames that wait for a batch.
// Capture goroutines hand it frames ([Batcher.Put]); the pipeline's
// inference goroutine takes batches ([Batcher.Next]). A batch holds at most
// one frame per camera: with schedule = "latest" each camera has one place,
// and a newer frame replaces (and releases) the one waiting there; with
// "queue" a camera's frames wait in order, its capture waits when its
// queue is full, and each batch takes the oldest.
//
// A batch runs as soon as one of these holds, whichever comes first:
//
//   - it is full: as many cameras have a frame as the batch size;
//   - every live camera has a frame;
//   - the wait (batch_wait) has passed since the first of its frames came.
//
// A camera is live from its first frame until the pipeline says it is down
// ([Batcher.SetLive]: source_down, a recording that ended). A live camera
// that has no frame when a batch runs on its wait is late: the batches
// after it do not wait for it until its next frame comes. So a camera that
// is down, ended or stalled holds the others up once, by at most the wait,
// and a camera that merely runs slower than the others is waited for
// again as soon as it delivers. A frame replaced by a newer one does not
// move the batch's deadline: a fast camera cannot keep a batch waiting.
//
// When more cameras have a frame than a batch holds, the oldest frames go
// first; a batch lists its frames in the order the cameras were added.
// Cameras may be added and removed while frames flow (a reload that
// changes a pipeline's sources); a removed camera's frames are released.
//
// # Cost
//
// Nothing on the path of a batch allocates: [Batch] is filled in place
// (make it with [Batcher.NewBatch] and reuse it), the timer is reused, and
// the state is fixed arrays sized by [Options.Cameras]. The wait is timed
// by a [Clock]; package batchtest has a manual one for tests.
package batch
