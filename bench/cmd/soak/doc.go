// Command soak runs coregate for a long time under mixed load, or through
// faults, and fails when it misbehaves. Subcommands:
//
//	soak [soak] [-d 30m]   mixed load at 70 % of the measured maximum with a
//	                       reload every 10 s; fails on RSS drift > 5 % after
//	                       warm-up, fd growth, 5xx, unanswered requests,
//	                       p99 drift > 50 %                (make soak)
//	soak chaos             one fault at a time under steady load; prints
//	                       the table of failed and explained requests and
//	                       fails on any failure a fault does not explain
//	                                                       (make chaos)
//	soak upstream          the upstream both start as a child process
//
// "soak <subcommand> -h" lists each one's flags. Every process it starts is
// stopped by its PID when it ends, fails or is interrupted.
package main
