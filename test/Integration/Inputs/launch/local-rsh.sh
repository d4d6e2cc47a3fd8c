#!/bin/sh
# An rsh agent for Open MPI (OMPI_MCA_plm_rsh_agent) that runs the remote
# command on this machine: hostfile entries with made-up names then act as
# separate hosts, each with its own daemon and local ranks, without ssh.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
# Each daemon would make its session directory under the same TMPDIR
# (ompi.<machine>.<uid>/jf.N) and the two race on it; a real host has its
# own.
TMPDIR="${TMPDIR:-/tmp}/local-rsh-$host"
mkdir -p "$TMPDIR"
export TMPDIR
exec sh -c "$*"
