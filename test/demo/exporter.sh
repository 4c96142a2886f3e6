# shellcheck shell=bash
# test/demo/exporter.sh: Debian's prometheus-postgres-exporter with the
# query file of monitoring/, for the demo's DEMO_SCRAPE=1 (the monitoring
# suite's checks are test/t/130_monitoring.pl).  Source it after
# test/lib/common.sh; it defines functions and changes nothing until they
# are called.
#
#   fencing_exporter_install     install the exporter and curl (apt)
#   fencing_exporter_start DB    start the exporter as the postgres OS user
#                                against database DB of the cluster at
#                                $PGPORT, on a free port of 127.0.0.1; sets
#                                FENCING_EXPORTER_URL and _PID
#   fencing_exporter_scrape      print one scrape of /metrics
#   fencing_exporter_fencing     ... only its fencing_ lines
#   fencing_exporter_stop        stop the exporter started (by its pid) and
#                                wait until it is gone

FENCING_EXPORTER_PID=
FENCING_EXPORTER_DIR=
FENCING_EXPORTER_URL=

fencing_exporter_install() {
    fencing_need demo
}

fencing_exporter_start() {
    local db=$1 port dir=$FENCING_WORK/exporter
    mkdir -p "$dir"
    rm -f "$dir/pid"
    cp "$FENCING_ROOT/monitoring/postgres-exporter-queries.yaml" "$dir/queries.yaml"
    chown -R postgres: "$dir"
    port=$(fencing_free_port)
    # the shell writes its pid and execs the exporter: the pid is the
    # exporter's, to be stopped by it alone
    # shellcheck disable=SC2016  # the sh -c script expands its own arguments
    runuser -u postgres -- env \
        DATA_SOURCE_NAME="host=127.0.0.1 port=$PGPORT user=postgres dbname=$db sslmode=disable" \
        sh -c 'echo $$ > "$1/pid"; exec prometheus-postgres-exporter \
                 --web.listen-address="127.0.0.1:$2" \
                 --extend.query-path="$1/queries.yaml" \
                 --disable-settings-metrics --log.level=warn' \
        sh "$dir" "$port" >"$dir/exporter.log" 2>&1 &
    FENCING_EXPORTER_DIR=$dir
    FENCING_EXPORTER_URL=http://127.0.0.1:$port/metrics
    for _ in $(seq 1 100); do
        # The pid is read only once the exporter answers: the shell wrote
        # it before it became the exporter.  (Looking for it before asking
        # lost it whenever the exporter came up while curl was starting,
        # and the exporter then outlived the run.)
        if curl -sf -o /dev/null "$FENCING_EXPORTER_URL"; then
            FENCING_EXPORTER_PID=$(cat "$dir/pid")
            return 0
        fi
        sleep 0.2
    done
    cat "$dir/exporter.log" >&2
    fencing_exporter_stop
    return 1
}

fencing_exporter_scrape() {
    curl -sf "$FENCING_EXPORTER_URL"
}

fencing_exporter_fencing() {
    fencing_exporter_scrape | grep -E '^(# (HELP|TYPE) )?fencing_'
}

fencing_exporter_stop() {
    local pid=$FENCING_EXPORTER_PID
    if [ -z "$pid" ] && [ -n "$FENCING_EXPORTER_DIR" ] && [ -s "$FENCING_EXPORTER_DIR/pid" ]; then
        pid=$(cat "$FENCING_EXPORTER_DIR/pid")
    fi
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null
        # gone before the caller removes its directory or checks for it
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -9 "$pid" 2>/dev/null
        fi
    fi
    FENCING_EXPORTER_PID=
    FENCING_EXPORTER_DIR=
    return 0
}
