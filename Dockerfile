# The eventbox image: the static binary and the demo bundle, FROM scratch (no shell, no libc, no
# package manager). Build it with scripts/image.sh, which builds the binary first and puts it
# where this file copies it from (target/image/context/).
#
#   docker run --rm --read-only --cap-drop ALL --security-opt no-new-privileges \
#       -p 127.0.0.1:8080:8080 eventbox:0.1.0
FROM scratch

ARG VERSION=0.0.0
ARG SOURCE=unknown
LABEL org.opencontainers.image.title="eventbox" \
      org.opencontainers.image.description="A stand-in server for an event platform's API, answering from snapshots on disk" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="MIT OR Apache-2.0"

COPY target/image/context/eventbox /eventbox
# The demo bundle; mount a data folder over /data to serve your own.
COPY data /data
# Hidden by a folder mounted over /data; while it is there, `serve` warns that the demo is served.
COPY target/image/context/image-demo /data/.eventbox-image-demo
# An empty folder owned by the user, for state written at run time (mount a volume there).
COPY --chown=10001:10001 target/image/context/state /state

# Listen on every interface inside the container; JSON log lines for the log collector.
ENV EVENTBOX_ADDR=0.0.0.0:8080 \
    EVENTBOX_DATA=/data \
    EVENTBOX_LOG_FORMAT=json
# A numeric user, so that runAsNonRoot can check it without an /etc/passwd.
USER 10001:10001
EXPOSE 8080
# The binary is its own health check: there is no curl in the image. Exit 0 when ready, 1 not.
# Without a URL it asks /readyz where serve listens: a port set with EVENTBOX_ADDR is followed.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/eventbox", "probe"]
ENTRYPOINT ["/eventbox"]
CMD ["serve"]
