# Shared by the bench/ scripts (sourced).

# Removes the packed dataset DIR when it was left over from format 1 (which spent a 4 KiB
# block on every tiny raw file), so that the caller packs it again and every figure is of
# the current format. The version is the partition header's 32-bit field at byte 8.
drop_format_1() {
  if [ -f "$1/part-00000.fsb" ] && [ "$(od -An -tu4 -j8 -N4 "$1/part-00000.fsb" | tr -d ' ')" = 1 ]; then
    rm -rf "$1"
  fi
}
