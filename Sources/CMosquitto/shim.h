#ifndef CMOSQUITTO_SHIM_H
#define CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
