module github.com/gohtgs/htgs/bench/taskflow/streaming

go 1.26.0

require github.com/gohtgs/htgs v0.0.0

// ab.sh builds this program against other trees of htgs (git worktrees)
// by pointing this replace elsewhere in a copy of the folder.
replace github.com/gohtgs/htgs => ../../..
