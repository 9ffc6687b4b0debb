/*
 * A Kafka-protocol peer for tests (../shared/TESTING.md): librdkafka's mock cluster on loopback
 * ports. Usage: kafka-mock BROKERS [TOPIC:PARTITIONS ...]
 * Prints "bootstrap HOST:PORT,..." once the cluster is up, then reads commands on stdin, one per
 * line, and answers each with "ok" or "err <why>":
 *   topic NAME PARTITIONS REPLICATION   create a topic
 *   leader TOPIC PARTITION BROKER       move a partition's leader
 *   down BROKER / up BROKER             stop or restart a broker
 *   rtt BROKER MS                       delay a broker's answers
 *   coordinator GROUP BROKER            move a consumer group's coordinator
 * It exits when stdin closes (or on SIGTERM).
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int answer(rd_kafka_resp_err_t err) {
  if (err) printf("err %s\n", rd_kafka_err2str(err)); else printf("ok\n");
  return fflush(stdout);
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: kafka-mock BROKERS [TOPIC:PARTITIONS ...]\n"); return 2; }
  int brokers = atoi(argv[1]);
  char errstr[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!rk) { fprintf(stderr, "rd_kafka_new: %s\n", errstr); return 1; }
  rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, brokers);
  if (!mc) { fprintf(stderr, "rd_kafka_mock_cluster_new failed\n"); return 1; }
  for (int i = 2; i < argc; i++) {
    char name[256]; int partitions = 1;
    if (sscanf(argv[i], "%255[^:]:%d", name, &partitions) < 1) continue;
    rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(mc, name, partitions, brokers < 3 ? brokers : 3);
    if (err) { fprintf(stderr, "topic %s: %s\n", name, rd_kafka_err2str(err)); return 1; }
  }
  printf("bootstrap %s\n", rd_kafka_mock_cluster_bootstraps(mc));
  fflush(stdout);

  char line[1024];
  while (fgets(line, sizeof line, stdin)) {
    char cmd[32], a[256]; int x = 0, y = 0;
    int n = sscanf(line, "%31s %255s %d %d", cmd, a, &x, &y);
    if (n < 1) continue;
    if (!strcmp(cmd, "topic") && n == 4) answer(rd_kafka_mock_topic_create(mc, a, x, y));
    else if (!strcmp(cmd, "leader") && n == 4) answer(rd_kafka_mock_partition_set_leader(mc, a, x, y));
    else if (!strcmp(cmd, "down") && n >= 2) answer(rd_kafka_mock_broker_set_down(mc, atoi(a)));
    else if (!strcmp(cmd, "up") && n >= 2) answer(rd_kafka_mock_broker_set_up(mc, atoi(a)));
    else if (!strcmp(cmd, "rtt") && n >= 3) answer(rd_kafka_mock_broker_set_rtt(mc, atoi(a), x));
    else if (!strcmp(cmd, "coordinator") && n == 3) answer(rd_kafka_mock_coordinator_set(mc, "group", a, x));
    else { printf("err unknown command: %s", line); fflush(stdout); }
  }
  rd_kafka_mock_cluster_destroy(mc);
  rd_kafka_destroy(rk);
  return 0;
}
