# sluice cluster mode on Nomad (docs/cluster.md): three `sluice node`
# allocations of one job, one per client machine. The allocation index
# makes the node id (node-0, node-1, node-2): a replacement allocation
# reuses its index, so a restarted node rejoins under its id. Run with:
#   nomad job run deploy/nomad/sluice-node.nomad.hcl
job "sluice-orders" {
  type = "service"

  group "node" {
    count = 3

    # One node per machine, so a machine loss is one failover.
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    # A node that exits (a failed job, etcd gone for long) is restarted
    # in place; the others keep the job going meanwhile.
    restart {
      attempts = 10
      interval = "10m"
      delay    = "5s"
      mode     = "delay"
    }

    network {
      port "http" { static = 9249 }
      port "exchange" { static = 7070 }
    }

    service {
      name     = "sluice-orders"
      port     = "http"
      provider = "nomad"
      # /healthz needs no token; /readyz: a standby is ready, the leader
      # once its job runs and its checkpoints complete.
      check {
        type     = "http"
        path     = "/readyz"
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "sluice" {
      driver = "exec"

      # Longer than a leader's job cancellation and resign.
      kill_timeout = "60s"
      kill_signal  = "SIGTERM"

      # Through a shell, so that the variables of secrets/node.env reach
      # the flags; NOMAD_* are interpolated by Nomad.
      config {
        command = "/bin/sh"
        args = ["-c", <<EOT
exec /usr/local/bin/sluice node \
  --cluster-etcd "$SLUICE_ETCD" \
  --node-id "node-${NOMAD_ALLOC_INDEX}" \
  --node-addr "${NOMAD_ADDR_exchange}" \
  --cluster-prefix /sluice/orders/ \
  --lease-ttl 10s \
  --etcd-cert /etc/sluice/tls/client.crt \
  --etcd-key /etc/sluice/tls/client.key \
  --etcd-ca /etc/sluice/tls/ca.crt \
  --tls-cert /etc/sluice/tls/node.crt \
  --tls-key /etc/sluice/tls/node.key \
  --tls-ca /etc/sluice/tls/node-ca.crt \
  --http 0.0.0.0:9249 \
  --http-token-env SLUICE_HTTP_TOKEN \
  --log-format json \
  local/pipeline.yaml
EOT
        ]
      }

      # SLUICE_ETCD, SLUICE_HTTP_TOKEN, KAFKA_BROKERS and the AWS_*
      # variables of the S3 checkpoint.dir, from Nomad variables.
      template {
        destination = "secrets/node.env"
        env         = true
        data        = <<EOT
{{- with nomadVar "nomad/jobs/sluice-orders" }}
SLUICE_ETCD={{ .etcd }}
SLUICE_HTTP_TOKEN={{ .http_token }}
KAFKA_BROKERS={{ .kafka }}
AWS_ACCESS_KEY_ID={{ .aws_access_key_id }}
AWS_SECRET_ACCESS_KEY={{ .aws_secret_access_key }}
AWS_REGION={{ .aws_region }}
{{- end }}
EOT
      }

      template {
        destination = "local/pipeline.yaml"
        data        = <<EOT
name: orders
parallelism: 4
delivery: exactly-once
checkpoint:
  interval: 10s
  dir: s3://my-bucket/sluice/orders   # shared by every node
source:
  type: kafka
  options:
    brokers: $${KAFKA_BROKERS}
    topics: orders
sink:
  type: kafka
  options:
    brokers: $${KAFKA_BROKERS}
    topic: orders-clean
EOT
      }

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
