// Package kerneltest drives the real Linux kernel inside network namespaces so
// that tests elsewhere in packetwalk can compare the simulator with the
// kernel. It deliberately imports no other packetwalk package: it speaks the
// text of the real tools (iptables-save, conntrack -L) and raw frame bytes.
//
// Every kernel-backed test starts with [Require], which skips unless the
// environment variable PACKETWALK_KERNEL is 1, and fails when it is 1 but the
// process is not root or a tool is missing.
//
// Two building blocks are offered:
//
//   - [NS]: one namespace created for a test (deleted in t.Cleanup), with
//     helpers to run iptables-restore, iptables-save, iptables, ipset and
//     conntrack inside it.
//   - [Lab]: the three-namespace topology client — node — server of
//     docs/kernel-notes.md ("Lab topology"), reusable across thousands of
//     cases through [Lab.Reset], with frame injection on the wires and frame
//     capture at both ends.
//
// # Determinism
//
// After frames are injected the lab waits for their outcome without sleeping:
// the injecting thread is pinned to one CPU, so every frame it sends, and
// every frame the kernel forwards or generates in response, goes through the
// same per-CPU receive backlog in FIFO order. [Lab.Settle] then bounces ARP
// requests off the node (ARP is never filtered by iptables or ip6tables); when
// the k-th ARP reply reaches the client, every frame that is at most 2k-1
// hops downstream of the injected ones has been processed, counters updated
// and captured. The default of 3 rounds covers chains of 5 hops, e.g.
// client → node → server → node → client. ARP frames and Ethernet multicast
// (IPv6 MLD reports) are therefore reserved for the harness and left out of
// observations.
//
// # Cost
//
// Measured on the development machine (2 CPUs, kernel 6.18): one case of
// Reset + one frame + Settle + Counters takes about 32 ms, i.e. about 30
// cases per second per Lab. Exchange itself takes about 15 µs; Reset takes
// most of the time because replacing nf_tables base chains waits for kernel
// RCU grace periods. Those waits overlap across namespaces, so independent
// Labs in parallel goroutines (distinct LabConfig.Prefix not needed, names
// are unique) reach about 85 cases per second with 4 Labs.
package kerneltest
