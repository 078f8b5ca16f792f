#!/bin/bash
# Runs inside the image's chroot during `weavegym image build`. Arguments come from the recipe.
#   provision.sh DESKTOP_USER "PACKAGES…" SESSION_COMMAND PYTHON
set -euo pipefail
DESKTOP_USER=$1
PACKAGES=$2
SESSION_COMMAND=$3
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

# No service may start inside the build chroot.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d

apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $PACKAGES
# /var/cache/apt/archives is the host's persistent .deb cache (bind-mounted): keep it, drop the lists.
rm -rf /var/lib/apt/lists/*

# The unprivileged desktop user: no password, no sudo (tasks that need sudo grant it in their setup).
id "$DESKTOP_USER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$DESKTOP_USER"
passwd --delete "$DESKTOP_USER" >/dev/null
passwd --lock root >/dev/null

echo weavegym > /etc/hostname
printf '127.0.0.1 localhost\n127.0.1.1 weavegym\n' > /etc/hosts
printf '/dev/vda / ext4 defaults,noatime 0 1\n' > /etc/fstab
cat > /etc/systemd/network/20-wired.network <<'NET'
[Match]
Name=e*
[Network]
DHCP=ipv4
NET

# No blinking text cursors: a blinking caret makes two frames of an idle screen differ, which breaks
# "wait until the screen settles" and pixel-identical resets. GTK reads settings.ini; XFCE's xsettings
# daemon overrides it, so the full profile also gets the xfconf default.
mkdir -p /etc/gtk-3.0
printf '[Settings]\ngtk-cursor-blink = false\n' > /etc/gtk-3.0/settings.ini
XSETTINGS=/etc/xdg/xfce4/xfconf/xfce-perchannel-xml/xsettings.xml
if [ -f $XSETTINGS ]; then
  sed -i 's|name="CursorBlink" type="bool" value="true"|name="CursorBlink" type="bool" value="false"|' $XSETTINGS
fi

cat > /etc/weavegym-session.conf <<CONF
DESKTOP_USER=$DESKTOP_USER
SESSION_COMMAND="$SESSION_COMMAND"
CONF

# Agent venv from wheels built on the host: no network needed here.
python3 -m venv /opt/weavegym/venv
/opt/weavegym/venv/bin/pip install -q --no-index --find-links /tmp/weavegym-wheels \
  grpcio protobuf python-xlib
/opt/weavegym/venv/bin/pip install -q --no-index --no-deps --find-links /tmp/weavegym-wheels weavegym
/opt/weavegym/venv/bin/python -c "import weavegym.guest_agent.server"

systemctl enable systemd-networkd.service weavegym-xorg.service weavegym-session.service \
  weavegym-agent.service ssh.service >/dev/null 2>&1
# Boot time is reset time's enemy under TCG: drop what a desktop VM for agents does not need.
systemctl mask apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer \
  e2scrub_reap.service fstrim.timer systemd-timesyncd.service getty@tty1.service \
  systemd-networkd-wait-online.service >/dev/null 2>&1 || true
systemctl set-default graphical.target >/dev/null

rm -f /usr/sbin/policy-rc.d
rm -rf /tmp/weavegym-wheels
