// Package hatest is the kill -9 suite of issue 18 (make test-ha,
// scripts/test-ha.sh): several dpfl-server replicas on one etcd store,
// with faults injected while a job runs, and checks of what the store and
// the transparency log hold afterwards.
//
// The harness (this package, built always, its pure parts unit-tested by
// go test ./...): Env starts a 3-member etcd cluster (internal/etcdtest,
// whose members can be killed, restarted on their data directories and
// paused) and dpfl-server replicas (Replica: kill -9, restart on the same
// port and ID, SIGSTOP/SIGCONT), each reaching etcd through its own Proxy
// per member, which can blackhole the link. Watcher polls the job on every
// live replica every 50 ms (when each round was first seen committed, and
// by which leader epoch), tails the transparency log and scrapes each
// replica's dpfl_store_fenced_writes_total and
// dpfl_leader_phantom_wins_total. Scenario injects the faults and records
// them; Analyze measures each one's gap to the next commit (the first
// round whose release leaf was written after the fault) and Table prints
// them; ReadLog and LogCheck.Problems find rounds committed twice or
// never, and commits without a charge; VerifyBundle runs dpfl-client
// audit --bundle and dpfl-client verify.
//
// The suite itself is ha_test.go, behind the build tag ha, so that go
// test ./... does not run it: TestHAFaults (a 100-round DP logreg job
// under 13 faults) and TestHADevices (a devices job with 10 dpfl-client
// participate processes; only with DPFL_HA_DEVICES=1, which
// scripts/test-ha.sh sets unless told 0). Environment:
//
//	DPFL_HA_SERVER_BIN, DPFL_HA_CLIENT_BIN  the binaries (built by the test when unset)
//	DPFL_HA_DIR            keep the work directories (logs, etcd data, bundles) there
//	DPFL_HA_DEVICES=1      run TestHADevices
//	DPFL_HA_SINGLE=1       one replica without the leader flags: the etcd faults only
//	DPFL_HA_BLACKHOLE=hold hold the blackholed link's bytes and deliver them after (a
//	                       partition TCP rides out) instead of dropping them (etcd's proxy)
//	DPFL_HA_ROUNDS, DPFL_HA_DEVICE_ROUNDS  the jobs' rounds (100, 15)
//	DPFL_HA_ROUND_MS       the logreg round's target wall time (450): a short job
//	                       calibrates the local epochs to it; DPFL_HA_EPOCHS fixes them
//	DPFL_ETCD_BIN, DPFL_ETCD_LOG_LEVEL  etcd's binary and log level (internal/etcdtest)
package hatest
