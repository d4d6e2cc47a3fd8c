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
shift # the host name
exec sh -c "$*"
