module github.com/gohtgs/htgs/bench/taskflow

go 1.26.0

require (
	github.com/gohtgs/htgs v0.0.0
	github.com/noneback/go-taskflow v1.2.0
)

// run.sh points go-taskflow at a checkout of its source (the module proxy
// does not serve it) in a copy of this folder.
replace github.com/gohtgs/htgs => ../..
