package main

import "testing"

// ledge consume --key prints one device's commands, and with --consumer
// --commit resumes after them without printing the other devices'; a
// --key-prefix prints every key under it; the two flags together are
// refused.
func TestConsumeKeyThroughCLI(t *testing.T) {
	n := serve(t, t.TempDir())
	n.mustRun(t, "", "topic", "create", "commands")
	for _, kv := range [][2]string{{"dev-1", "reboot"}, {"dev-2", "update"}, {"dev-10", "ping"}, {"dev-1", "halt"}} {
		n.mustRun(t, kv[1]+"\n", "produce", "commands", "--key", kv[0])
	}
	if out := n.mustRun(t, "", "consume", "commands", "--key", "dev-1", "--consumer", "dev-1", "--commit"); out != "reboot\nhalt\n" {
		t.Fatalf("--key dev-1 printed %q", out)
	}
	n.mustRun(t, "again\n", "produce", "commands", "--key", "dev-1")
	if out := n.mustRun(t, "", "consume", "commands", "--key", "dev-1", "--consumer", "dev-1"); out != "again\n" {
		t.Fatalf("--key dev-1 after its commit printed %q", out)
	}
	if out := n.mustRun(t, "", "consume", "commands", "--key-prefix", "dev-1"); out != "reboot\nping\nhalt\nagain\n" {
		t.Fatalf("--key-prefix dev-1 printed %q", out)
	}
	if _, errOut, err := n.run(t, "", "consume", "commands", "--key", "a", "--key-prefix", "b"); err == nil || errOut == "" {
		t.Fatalf("--key with --key-prefix: err %v, stderr %q", err, errOut)
	}
}
