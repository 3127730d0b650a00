package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// The network every run builds, on this machine only: a bridge in the root
// namespace holding bridgeAddr, and per node a namespace with one end of a
// veth pair holding nodeAddr(id), the other end on the bridge. Clients run
// in the root namespace and reach every node over the bridge; nodes reach
// each other through it. Names carry a fixed prefix so a later run can
// find and remove what a killed run left behind.
const (
	subnet     = "10.213.77"
	bridgeName = "schaos0"
	nsPrefix   = "sluicechaos"
	vethPrefix = "schv"
	bridgeAddr = subnet + ".1"
)

func nsName(id int32) string     { return fmt.Sprintf("%s%d", nsPrefix, id) }
func nodeAddr(id int32) string   { return fmt.Sprintf("%s.%d", subnet, 10+id) }
func vethHost(id int32) string   { return fmt.Sprintf("%s%d", vethPrefix, id) }
func vethNode(id int32) string   { return fmt.Sprintf("%s%dn", vethPrefix, id) }
func ipCmd(args ...string) error { return run("ip", args...) }

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupBridge creates the bridge with the root namespace's address.
func setupBridge() error {
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", bridgeAddr + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return err
		}
	}
	return nil
}

// setupNamespace creates node id's namespace, joined to the bridge.
func setupNamespace(id int32) error {
	ns := nsName(id)
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", vethHost(id), "type", "veth", "peer", "name", vethNode(id)},
		{"link", "set", vethNode(id), "netns", ns},
		{"link", "set", vethHost(id), "master", bridgeName, "up"},
		{"-n", ns, "addr", "add", nodeAddr(id) + "/24", "dev", vethNode(id)},
		{"-n", ns, "link", "set", vethNode(id), "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			return err
		}
	}
	return nil
}

// blackhole drops, inside from's namespace, every packet from sends to
// to: a one-way cut, silent (no RST, no FIN), as a broken link looks.
func blackhole(from, to int32) error {
	return ipCmd("-n", nsName(from), "route", "add", "blackhole", nodeAddr(to)+"/32")
}

// healNetwork removes every blackhole route in the nodes' namespaces.
func healNetwork(ids []int32) error {
	var first error
	for _, id := range ids {
		if err := ipCmd("-n", nsName(id), "route", "flush", "type", "blackhole"); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// cleanupNetwork removes what this harness creates, from this run or a
// killed one: processes inside our namespaces (found by namespace, so
// nothing else is touched), the namespaces, the veths and the bridge,
// and tmpfs mounts under workBase.
func cleanupNetwork(workBase string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
			continue
		}
		pids, _ := exec.Command("ip", "netns", "pids", f[0]).Output()
		for _, s := range strings.Fields(string(pids)) {
			if pid, err := strconv.Atoi(s); err == nil {
				syscall.Kill(pid, syscall.SIGCONT)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		ipCmd("netns", "del", f[0])
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(links), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, vethPrefix) || name == bridgeName {
			ipCmd("link", "del", name)
		}
	}
	unmountUnder(workBase)
}

// unmountUnder unmounts every mount point below dir (the full-disk
// fault's tmpfs data dirs).
func unmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil || dir == "" {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] == "tmpfs" && strings.HasPrefix(f[1], dir+"/") {
			syscall.Unmount(f[1], syscall.MNT_DETACH)
		}
	}
}
