// Package cputime reads the processor time the process has used, for the
// measurements of the cap package and its model command.
package cputime
