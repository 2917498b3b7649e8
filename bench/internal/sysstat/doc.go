// Package sysstat reads what Linux knows about a process — CPU time,
// bytes sent to storage, peak resident memory — from /proc, and pins
// processes to CPUs with sched_setaffinity.
//
// It is the benchmark's only window on a server: the servers run as
// separate processes, so everything measured about them comes from here
// and not from their own reports.
package sysstat
