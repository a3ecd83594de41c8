# shellcheck shell=bash
# Sourced by the benchmark scripts that start Spark from an empty Ivy home (a cold machine's):
# `ivy_aside WORK` moves Ivy's home aside into the folder WORK and, when the script exits, puts it
# back and removes WORK. Ivy's home is ~/.ivy2.5.2 under the password database's home directory,
# the JVM's user.home, which setting HOME does not move; IVY names it, for the script to empty
# between runs.
IVY=$(getent passwd "$(id -u)" | cut -d: -f6)/.ivy2.5.2

ivy_aside() {
  IVY_WORK=$1
  if [[ -e "$IVY" ]]; then mv "$IVY" "$IVY_WORK/ivy-kept"; fi
  trap _ivy_back EXIT
}

_ivy_back() {
  rm -rf "$IVY"
  if [[ -e "$IVY_WORK/ivy-kept" ]]; then mv "$IVY_WORK/ivy-kept" "$IVY"; fi
  rm -rf "$IVY_WORK"
}
