# A one-master, one-chunkserver MooseFS started by a benchmark or test, torn down by
# mfs_stop. The daemons run in a network namespace of their own (mfschunkserver refuses a
# master on 127.x): a veth pair gives them 10.231.0.2 and the host 10.231.0.1, and the
# client (mfsmount) runs on the host. Source it; needs root and moosefs-{master,
# chunkserver,client,cli}. Variables: MFS_DIR (state, made), MFS_MNT (the mount, made).
MFS_NS=fanstore-mfs-$$
MFS_HOST_IP=10.231.0.1
MFS_IP=10.231.0.2
mfs_start() {
  mkdir -p "$MFS_DIR/master" "$MFS_DIR/chunks" "$MFS_MNT"
  chown -R mfs:mfs "$MFS_DIR/master" "$MFS_DIR/chunks"
  cp /var/lib/mfs/metadata.mfs.empty "$MFS_DIR/master/metadata.mfs"
  chown mfs:mfs "$MFS_DIR/master/metadata.mfs"
  cat >"$MFS_DIR/mfsmaster.cfg" <<CFG
DATA_PATH = $MFS_DIR/master
EXPORTS_FILENAME = $MFS_DIR/mfsexports.cfg
CFG
  echo "*	/	rw,alldirs,admin,maproot=0:0" >"$MFS_DIR/mfsexports.cfg"
  cat >"$MFS_DIR/mfschunkserver.cfg" <<CFG
DATA_PATH = $MFS_DIR/master
HDD_CONF_FILENAME = $MFS_DIR/mfshdd.cfg
MASTER_HOST = $MFS_IP
HDD_LEAVE_SPACE_DEFAULT = 64MiB
CFG
  echo "$MFS_DIR/chunks" >"$MFS_DIR/mfshdd.cfg"
  ip netns add "$MFS_NS"
  ip link add "fsm$$h" type veth peer name "fsm$$n"
  ip link set "fsm$$n" netns "$MFS_NS"
  ip addr add $MFS_HOST_IP/24 dev "fsm$$h"
  ip link set "fsm$$h" up
  ip netns exec "$MFS_NS" ip addr add $MFS_IP/24 dev "fsm$$n"
  ip netns exec "$MFS_NS" ip link set "fsm$$n" up
  ip netns exec "$MFS_NS" ip link set lo up
  ip netns exec "$MFS_NS" mfsmaster -c "$MFS_DIR/mfsmaster.cfg" start >"$MFS_DIR/master.log" 2>&1 || return 1
  ip netns exec "$MFS_NS" mfschunkserver -c "$MFS_DIR/mfschunkserver.cfg" start >"$MFS_DIR/cs.log" 2>&1 || return 1
  for _ in $(seq 100); do
    mfscli -H $MFS_IP -SCS 2>/dev/null | grep -q "$MFS_IP" && break
    sleep 0.2
  done
  mfsmount -H $MFS_IP "$MFS_MNT" >"$MFS_DIR/mount.log" 2>&1 || return 1
}
mfs_stop() {  # (each step may find its part gone already)
  umount "$MFS_MNT" 2>/dev/null || umount -l "$MFS_MNT" 2>/dev/null || true
  ip netns exec "$MFS_NS" mfschunkserver -c "$MFS_DIR/mfschunkserver.cfg" stop >/dev/null 2>&1 || true
  ip netns exec "$MFS_NS" mfsmaster -c "$MFS_DIR/mfsmaster.cfg" stop >/dev/null 2>&1 || true
  ip link del "fsm$$h" 2>/dev/null || true
  ip netns del "$MFS_NS" 2>/dev/null || true
}
