// Package harness holds no code; the packages under it are packetwalk's
// test harness (the real kernel in namespaces, the differential suites,
// benchmarks, golden files), which production code never imports. See
// package internal's documentation for the division.
package harness
