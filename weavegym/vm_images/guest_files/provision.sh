#!/bin/bash
# Runs inside the image's chroot during `weavegym image build`. Arguments come from the recipe.
#   provision.sh DESKTOP_USER "PACKAGES…" SESSION_COMMAND WORKSPACE_USER SHARED_GROUP
set -euo pipefail
DESKTOP_USER=$1
PACKAGES=$2
SESSION_COMMAND=$3
WORKSPACE_USER=$4
SHARED_GROUP=$5
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

# No service may start inside the build chroot.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod +x /usr/sbin/policy-rc.d

apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $PACKAGES
# /var/cache/apt/archives is the host's persistent .deb cache (bind-mounted): keep it, drop the lists.
rm -rf /var/lib/apt/lists/*

# Two accounts, two channels (README, "Two accounts"):
# - the desktop account runs the X session and every GUI app; a locked password, no sudo (tasks that need sudo
#   grant it in their setup);
# - the workspace account runs the episode's `shell` and `python` actions. It has no X access (see
#   weavegym-xauth), a uid of its own (so it can neither ptrace nor signal the desktop's processes, nor
#   read their environment), and the same home folder, so `~/...` means the same file on both channels.
# Both are in the shared group. The home is setgid (new files get the shared group) and sticky (neither
# side can delete or rename the other's files there); its dot folders belong to the desktop account alone.
getent group "$SHARED_GROUP" >/dev/null || groupadd "$SHARED_GROUP"
id "$DESKTOP_USER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash -G "$SHARED_GROUP" "$DESKTOP_USER"
HOME_DIR=/home/$DESKTOP_USER
id "$WORKSPACE_USER" >/dev/null 2>&1 || \
  useradd --no-create-home --home-dir "$HOME_DIR" --shell /bin/bash -G "$SHARED_GROUP" "$WORKSPACE_USER"
# Every password is locked: an empty one would let the shell `su` to the desktop account (PAM's nullok).
passwd --lock "$DESKTOP_USER" >/dev/null
passwd --lock "$WORKSPACE_USER" >/dev/null
passwd --lock root >/dev/null
install -d -o "$DESKTOP_USER" -g "$SHARED_GROUP" -m 0755 "$HOME_DIR/.config" "$HOME_DIR/.local" \
  "$HOME_DIR/.local/share" "$HOME_DIR/.cache"
install -d -o "$DESKTOP_USER" -g "$SHARED_GROUP" -m 0700 "$HOME_DIR/.ssh" "$HOME_DIR/.gnupg"
# The shell may add files to the shared home, so the dot files that desktop programs read at start (or
# that hold the session's secrets) exist already, owned by the desktop account: the shell can neither
# plant them nor replace them (sticky home).
for f in .bash_aliases .inputrc .gitconfig .xsessionrc .xprofile .xinitrc .xsession .Xresources .Xdefaults \
         .gtkrc-2.0 .pam_environment .selected_editor .wgetrc .curlrc; do
  install -o "$DESKTOP_USER" -g "$SHARED_GROUP" -m 0644 /dev/null "$HOME_DIR/$f"
done
for f in .Xauthority .ICEauthority .bash_history .python_history .lesshst .netrc; do
  install -o "$DESKTOP_USER" -g "$SHARED_GROUP" -m 0600 /dev/null "$HOME_DIR/$f"
done
# Neither episode account logs in over ssh (the ssh backend and the tests use root).
mkdir -p /etc/ssh/sshd_config.d
echo "DenyUsers $DESKTOP_USER $WORKSPACE_USER" > /etc/ssh/sshd_config.d/60-weavegym.conf
chown "$DESKTOP_USER:$SHARED_GROUP" "$HOME_DIR" "$HOME_DIR"/.bashrc "$HOME_DIR"/.profile "$HOME_DIR"/.bash_logout
chmod 3775 "$HOME_DIR"
# ptrace only of one's own descendants; no kernel log for the episode's accounts.
printf 'kernel.yama.ptrace_scope = 1\nkernel.dmesg_restrict = 1\nfs.protected_hardlinks = 1\nfs.protected_symlinks = 1\n' \
  > /etc/sysctl.d/60-weavegym.conf

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
# XFCE's settings daemon switches key autorepeat back on from its keyboards channel (default: on); the
# session script turns it off for openbox.
if [ -d /etc/xdg/xfce4/xfconf/xfce-perchannel-xml ]; then
  cat > /etc/xdg/xfce4/xfconf/xfce-perchannel-xml/keyboards.xml <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<channel name="keyboards" version="1.0">
  <property name="Default" type="empty">
    <property name="KeyRepeat" type="bool" value="false"/>
  </property>
</channel>
XML
fi

cat > /etc/weavegym-session.conf <<CONF
DESKTOP_USER=$DESKTOP_USER
WORKSPACE_USER=$WORKSPACE_USER
SESSION_COMMAND="$SESSION_COMMAND"
CONF

# Agent venv from wheels built on the host: no network needed here. Only the guest wheel (the agent and
# its protocol) enters the guest; task code, oracles, checkers and fixtures stay on the host. Root only.
python3 -m venv /opt/weavegym/venv
/opt/weavegym/venv/bin/pip install -q --no-index --find-links /tmp/weavegym-wheels \
  grpcio protobuf python-xlib
/opt/weavegym/venv/bin/pip install -q --no-index --no-deps --find-links /tmp/weavegym-wheels weavegym-guest
/opt/weavegym/venv/bin/python -c "import weavegym.guest_agent.server"
chmod 0700 /opt/weavegym

systemctl enable systemd-networkd.service weavegym-xorg.service weavegym-session.service \
  weavegym-agent.service weavegym-episode.service ssh.service >/dev/null 2>&1
# Boot time is reset time's enemy under TCG: drop what a desktop VM for agents does not need.
systemctl mask apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer \
  e2scrub_reap.service fstrim.timer systemd-timesyncd.service getty@tty1.service \
  systemd-networkd-wait-online.service >/dev/null 2>&1 || true
systemctl set-default graphical.target >/dev/null

rm -f /usr/sbin/policy-rc.d
rm -rf /tmp/weavegym-wheels
