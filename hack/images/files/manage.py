#!/usr/bin/env python3
# Django's management entry point for the OpenStack dashboard, installed by kstack's horizon
# image as /var/lib/kolla/venv/bin/manage.py (the path Kolla's horizon extend_start calls).
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openstack_dashboard.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
