"""Alerts: rules over the monitored metrics, firing and resolved events, silences, email."""
