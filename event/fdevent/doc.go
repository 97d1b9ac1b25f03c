// Package fdevent is the descriptor part of the event vocabulary: the
// descriptor events the fd capture (fdtrace) decodes from its ring buffer
// (Event, Call, Type; the numbers mirror bpf/fdtrack.h, which fdtrace's
// tests check) and the Table the agent follows them with. A Table, fed
// with the events in time order, knows which descriptors each process
// holds and which buffers they keep alive: it expands close_range, turns
// the last close of a buffer into a release, and answers the "open at
// exit" question for leak reports. The agent writes what it emits as
// [memtrace] fd / dmabuf / ion lines (agent.FDRecord, docs/fd.md).
package fdevent
