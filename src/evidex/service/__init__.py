"""The HTTP service (``service`` extra): each job as an endpoint, plus review queue, audit log
and Prometheus metrics. Stateless apart from the store, so it scales by replicas over one
PostgreSQL database."""

from evidex.service.app import create_app

__all__ = ["create_app"]
