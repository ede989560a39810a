/* broker-test.h: what broker-test.c (the fixture, the CA, leaves and the
 * secrets table) and broker-test-pump.c (whole connections) share. */
#pragma once

#include "box-plugin-context.h"
#include "box-broker-plugin.h"
#include "box-broker-secrets.h"

#define HOST        "upstream.test"
#define SANDBOX     "sbx-1"
#define PLACEHOLDER "__box_api_key__"
#define VALUE       "sk-live-0123456789"

typedef struct {
  char            *dir;
  BoxBrokerPlugin *plugin;
  BoxBrokerCa     *upstream_ca;   /* the test internet's CA */
  char            *bundle;        /* its certificate */
} Fixture;

/* The fixture's data: max_connections (0: the default). */
void       broker_test_set_up    (Fixture *f, gconstpointer data);
void       broker_test_tear_down (Fixture *f, gconstpointer data);
BoxSecret *broker_test_secret    (const char *const *hosts, const char *placeholder,
                                  const char *header, const char *format);
/* Sets one secret for SANDBOX (a NULL @secret: none). */
void       broker_test_set_one   (BoxBrokerPlugin *plugin, const BoxSecret *secret, const char *value);
void       broker_test_add_pump  (void);
